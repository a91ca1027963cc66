/*
 * test_ingest.c — the pure parts of ingestion: paper records from the
 * JSON shapes real sources use (CSL-JSON dates too), BibTeX entries
 * (macros, names, LaTeX, broken entries and caps), markdown chunking,
 * HTML to text.
 */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/buf.h"
#include "core/json.h"
#include "ingest/ingest.h"
#include "core/utf8.h"
#include "unit.h"

static json_t *parse(const char *text)
{
    json_t *value = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(value);
    return value;
}

START_TEST(test_paper_s2orc_shape)
{
    json_t *record = parse("{\"title\": \"State of muscles\", \"authors\": [{\"first\": \"Ma\", "
                           "\"middle\": [\"K\"], \"last\": \"Penkov\", \"suffix\": \"\"}], "
                           "\"abstract\": null, \"year\": 1975, \"doi\": null, \"venue\": null, "
                           "\"journal\": \"Oftalmol zh\"}");
    struct store_paper paper;
    struct keel_error err;

    ck_assert_int_eq(ingest_paper_from_json(record, "s2orc.jsonl", &paper, &err), KEEL_OK);
    ck_assert_str_eq(paper.title, "State of muscles");
    ck_assert_ptr_null(paper.abstract);
    ck_assert_int_eq(paper.year, 1975);
    ck_assert_str_eq(paper.venue, "Oftalmol zh");
    ck_assert_str_eq(json_string_value(json_array_get(paper.authors, 0)), "Ma K Penkov");
    ck_assert_int_eq(paper.is_open_access, 0);
    ck_assert_str_eq(paper.source, "s2orc.jsonl");
    store_paper_release(&paper);
    json_decref(record);
}
END_TEST

START_TEST(test_paper_other_shapes)
{
    json_t *record = parse("{\"title\": \"T\", \"publication_year\": \"2021\", \"DOI\": "
                           "\"https://doi.org/10.1/ABC\", \"author\": [{\"given\": \"Ada\", "
                           "\"family\": \"Lovelace\"}, \"Alan Turing\", {\"name\": \"Grace\"}], "
                           "\"openAccessPdf\": {\"url\": \"http://x/p.pdf\"}}");
    struct store_paper paper;
    struct keel_error err;

    ck_assert_int_eq(ingest_paper_from_json(record, NULL, &paper, &err), KEEL_OK);
    ck_assert_int_eq(paper.year, 2021);
    ck_assert_str_eq(paper.doi, "10.1/ABC");
    ck_assert_str_eq(paper.pdf_url, "http://x/p.pdf");
    ck_assert_int_eq(paper.is_open_access, 1);
    ck_assert_uint_eq(json_array_size(paper.authors), 3);
    ck_assert_str_eq(json_string_value(json_array_get(paper.authors, 0)), "Ada Lovelace");
    store_paper_release(&paper);
    json_decref(record);
}
END_TEST

START_TEST(test_paper_errors_name_the_field)
{
    const char *cases[][2] = {
        {"{\"abstract\": \"no title\"}", "title"},
        {"{\"title\": 5}", "title"},
        {"{\"title\": \"T\", \"year\": true}", "year"},  /* "soon" is now an unknown year */
        {"[1]", "record"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *record = parse(cases[i][0]);
        struct store_paper paper;
        struct keel_error err;
        ck_assert_int_eq(ingest_paper_from_json(record, NULL, &paper, &err), KEEL_EINVAL);
        ck_assert_str_eq(err.field, cases[i][1]);
        ck_assert_ptr_null(paper.title);
        json_decref(record);
    }
}
END_TEST

START_TEST(test_paper_csl_json_issued)
{
    json_t *record = parse("{\"type\": \"article-journal\", \"title\": \"CSL\", \"container-title\": "
                           "\"J\", \"issued\": {\"date-parts\": [[2019, 3]]}, \"author\": "
                           "[{\"family\": \"Doe\", \"given\": \"Jane\"}], \"DOI\": \"10.1/csl\"}");
    struct store_paper paper;
    struct keel_error err;

    ck_assert_int_eq(ingest_paper_from_json(record, NULL, &paper, &err), KEEL_OK);
    ck_assert_int_eq(paper.year, 2019);
    ck_assert_str_eq(paper.venue, "J");
    ck_assert_str_eq(json_string_value(json_array_get(paper.authors, 0)), "Jane Doe");
    store_paper_release(&paper);
    json_decref(record);
    /* A year as a string, and a date without parts: unknown. */
    record = parse("{\"title\": \"T\", \"issued\": {\"date-parts\": [[\"2018\"]]}}");
    ck_assert_int_eq(ingest_paper_from_json(record, NULL, &paper, &err), KEEL_OK);
    ck_assert_int_eq(paper.year, 2018);
    store_paper_release(&paper);
    json_decref(record);
    record = parse("{\"title\": \"T\", \"issued\": {\"raw\": \"spring\"}}");
    ck_assert_int_eq(ingest_paper_from_json(record, NULL, &paper, &err), KEEL_OK);
    ck_assert_int_eq(paper.year, 0);
    store_paper_release(&paper);
    json_decref(record);
}
END_TEST

/* Collects what ingest_bibtex reports: records and "line: why" lines. */
struct bib_seen {
    json_t *records;
    char problems[512];
};

static int collect(const json_t *record, long line, const char *why, void *arg)
{
    struct bib_seen *seen = arg;
    size_t len = strlen(seen->problems);

    if (record) {
        json_t *copy = json_deep_copy(record);
        json_object_set_new(copy, "line", json_integer(line));
        json_array_append_new(seen->records, copy);
    } else {
        snprintf(seen->problems + len, sizeof(seen->problems) - len, "%ld: %s; ", line, why);
    }
    return KEEL_OK;
}

static const char *str_at(const json_t *records, size_t i, const char *key)
{
    return json_string_value(json_object_get(json_array_get(records, i), key));
}

START_TEST(test_bibtex_entries)
{
    const char *bib =
        "Free text before entries is a comment.\n"
        "@String{jml = \"Journal of Machine Learning\"}\n"
        "@comment{ignored {nested} text}\n"
        "@ARTICLE{lovelace2020,\n"
        "  Title = {The {Analytical} Engine and M{\\\"u}ller's Notes --- a Review},\n"
        "  author = {Lovelace, Ada and Babbage, Charles and M\\\"{u}ller, J{\\\"o}rg and others},\n"
        "  journal = jml # \" Research\",\n"
        "  year = 2020, month = jan,\n"
        "  doi = {10.1234/ae.2020},\n"
        "  url = \"https://example.org/ae\",\n"
        "  abstract = {We study \\emph{engines} \\& notes, 50\\% faster.}\n"
        "}\n"
        "@inproceedings(garcia21,\n"
        "  title = \"Se{\\~n}ales in Espa{\\~n}a\",\n"
        "  author = {Garc{\\'\\i}a, Jos{\\'e} and van der Berg, Jr., Jan and Otherson, Mark},\n"
        "  booktitle = {Proceedings of ACL},\n"
        "  date = {2021-05-01},\n"
        "  url = {http://x.org/~user/a--b\\_c}, doi = {10.1000/a--b},\n"
        ")\n";
    struct bib_seen seen = {json_array(), ""};
    struct keel_error err;
    json_t *authors;

    ck_assert_int_eq(ingest_bibtex(bib, strlen(bib), collect, &seen, &err), KEEL_OK);
    ck_assert_str_eq(seen.problems, "");
    ck_assert_uint_eq(json_array_size(seen.records), 2);
    ck_assert_str_eq(str_at(seen.records, 0, "title"),
                     "The Analytical Engine and Müller's Notes — a Review");
    ck_assert_str_eq(str_at(seen.records, 0, "venue"), "Journal of Machine Learning Research");
    ck_assert_str_eq(str_at(seen.records, 0, "year"), "2020");
    ck_assert_str_eq(str_at(seen.records, 0, "doi"), "10.1234/ae.2020");
    ck_assert_str_eq(str_at(seen.records, 0, "url"), "https://example.org/ae");
    ck_assert_str_eq(str_at(seen.records, 0, "abstract"), "We study engines & notes, 50% faster.");
    ck_assert_str_eq(str_at(seen.records, 0, "bibtex_key"), "lovelace2020");
    ck_assert_str_eq(str_at(seen.records, 0, "bibtex_type"), "article");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(seen.records, 0), "line")), 4);
    authors = json_object_get(json_array_get(seen.records, 0), "author");
    ck_assert_uint_eq(json_array_size(authors), 3);   /* "others" is not a person */
    ck_assert_str_eq(json_string_value(json_array_get(authors, 0)), "Ada Lovelace");
    ck_assert_str_eq(json_string_value(json_array_get(authors, 2)), "Jörg Müller");
    ck_assert_str_eq(str_at(seen.records, 1, "title"), "Señales in España");
    ck_assert_str_eq(str_at(seen.records, 1, "url"), "http://x.org/~user/a--b_c");
    ck_assert_str_eq(str_at(seen.records, 1, "doi"), "10.1000/a--b");
    ck_assert_str_eq(str_at(seen.records, 1, "year"), "2021");
    ck_assert_str_eq(str_at(seen.records, 1, "venue"), "Proceedings of ACL");
    authors = json_object_get(json_array_get(seen.records, 1), "author");
    ck_assert_str_eq(json_string_value(json_array_get(authors, 0)), "José García");
    ck_assert_str_eq(json_string_value(json_array_get(authors, 1)), "Jan van der Berg Jr.");
    ck_assert_str_eq(json_string_value(json_array_get(authors, 2)), "Mark Otherson");
    json_decref(seen.records);
}
END_TEST

START_TEST(test_bibtex_broken_entries_are_skipped_with_their_line)
{
    const char *bib = "% written by me@example.org\n"   /* an @ in text: not an entry */
                      "@article{a, title = {One}}\n"
                      "@article{b, title {Two}, note = {mail x@y.org}}\n"
                      "@article{c, title = {Three}, author = \"Unclosed }\n"
                      "@book{d, title = {Four}}\n"
                      "@ {no type}\n"
                      "@misc{f, title = {Caf\xe9 in Latin-1}}\n"
                      "@misc{e, title = {Never closed\n";
    struct bib_seen seen = {json_array(), ""};
    struct keel_error err;

    ck_assert_int_eq(ingest_bibtex(bib, strlen(bib), collect, &seen, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(seen.records), 2);
    ck_assert_str_eq(str_at(seen.records, 0, "title"), "One");
    ck_assert_str_eq(str_at(seen.records, 1, "title"), "Four");
    ck_assert_str_eq(seen.problems, "3: a field name is not followed by =; "
                                    "4: a } closes nothing; "
                                    "7: a value is not UTF-8 text (convert the file to UTF-8); "
                                    "8: a { is never closed; ");
    json_decref(seen.records);
}
END_TEST

START_TEST(test_bibtex_unclosed_entry_does_not_swallow_the_next)
{
    const char *bib = "@article{one, title = {Good one}}\n"
                      "@article{two, title = {Never closed, year = 2020\n"
                      "@article{three, title = {Good three}}\n"
                      "@article{four, title = {No end}, year = 2021\n"
                      "  @book{five, title = {Good five}}\n";
    struct bib_seen seen = {json_array(), ""};
    struct keel_error err;

    ck_assert_int_eq(ingest_bibtex(bib, strlen(bib), collect, &seen, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(seen.records), 3);
    ck_assert_str_eq(str_at(seen.records, 0, "title"), "Good one");
    ck_assert_str_eq(str_at(seen.records, 1, "title"), "Good three");
    ck_assert_str_eq(str_at(seen.records, 2, "title"), "Good five");
    ck_assert_str_eq(seen.problems, "2: a { is never closed; 4: a field name is expected; ");
    json_decref(seen.records);
}
END_TEST

START_TEST(test_bibtex_caps)
{
    struct keel_buf bib;
    struct bib_seen seen = {json_array(), ""};
    struct keel_error err;

    keel_buf_init(&bib, 0);
    /* braces 40 deep */
    keel_buf_adds(&bib, "@misc{deep, title = ");
    for (int i = 0; i < 40; i++)
        keel_buf_addc(&bib, '{');
    for (int i = 0; i < 40; i++)
        keel_buf_addc(&bib, '}');
    keel_buf_adds(&bib, "}\n@misc{long, title = {");
    for (int i = 0; i < 70000; i++)
        keel_buf_addc(&bib, 'x');
    keel_buf_adds(&bib, "}}\n@misc{fine, title = {Fine}}\n");
    ck_assert_int_eq(ingest_bibtex(bib.data, bib.len, collect, &seen, &err), KEEL_OK);
    ck_assert_uint_eq(json_array_size(seen.records), 1);
    ck_assert_str_eq(str_at(seen.records, 0, "title"), "Fine");
    ck_assert_str_eq(seen.problems, "1: braces nested too deep; 2: a value is longer than 64 KiB; ");
    keel_buf_release(&bib);
    json_decref(seen.records);
}
END_TEST

START_TEST(test_chunk_sections_and_paragraphs)
{
    const char *md = "Intro line one\nstill intro.\n\n# Appeals\n\nFirst para.\n\n"
                     "## External review\n\nSecond para.\n";
    struct ingest_chunks chunks;

    ck_assert_int_eq(ingest_chunk_markdown(md, strlen(md), &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 3);
    ck_assert_ptr_null(chunks.items[0].section);
    ck_assert_str_eq(chunks.items[0].text, "Intro line one still intro.");
    ck_assert_str_eq(chunks.items[1].section, "Appeals");
    ck_assert_str_eq(chunks.items[1].text, "First para.");
    ck_assert_str_eq(chunks.items[2].section, "Appeals > External review");
    ck_assert_str_eq(chunks.items[2].text, "Second para.");
    ingest_chunks_release(&chunks);
}
END_TEST

START_TEST(test_chunk_long_text_is_cut_at_spaces)
{
    char text[5000];
    struct ingest_chunks chunks;
    size_t total = 0;

    for (size_t i = 0; i < sizeof(text) - 1; i++)
        text[i] = i % 7 == 6 ? ' ' : 'a';
    text[sizeof(text) - 1] = '\0';
    ck_assert_int_eq(ingest_chunk_markdown(text, strlen(text), &chunks), KEEL_OK);
    ck_assert_uint_ge(chunks.n, 4);
    for (size_t i = 0; i < chunks.n; i++) {
        size_t len = strlen(chunks.items[i].text);
        ck_assert_uint_le(len, INGEST_CHUNK_TARGET);
        ck_assert_int_ne(chunks.items[i].text[len - 1], ' ');
        total += len;
    }
    ck_assert_uint_ge(total, 4999 - chunks.n);  /* only the cut spaces are gone */
    ingest_chunks_release(&chunks);
}
END_TEST

START_TEST(test_chunk_out_of_memory)
{
    const char *md = "# A\n\ntext\n\n# B\n\nmore\n";
    int succeeded = 0;

    for (long n = 0; n < 50; n++) {
        struct ingest_chunks chunks;
        int rc;
        keel_alloc_fail_after(n, 0);
        rc = ingest_chunk_markdown(md, strlen(md), &chunks);
        keel_alloc_fail_after(-1, 0);
        ck_assert(rc == KEEL_OK || rc == KEEL_ENOMEM);
        if (rc == KEEL_ENOMEM)
            ck_assert_uint_eq(chunks.n, 0);
        else
            succeeded = 1;
        ingest_chunks_release(&chunks);
    }
    ck_assert(succeeded);  /* the loop reached enough allocations to finish */
}
END_TEST

/* A word longer than a chunk is cut between characters, never inside one. */
START_TEST(test_chunk_cut_keeps_utf8)
{
    struct keel_buf md;
    struct ingest_chunks chunks;
    size_t total = 0;

    keel_buf_init(&md, 0);
    ck_assert_int_eq(keel_buf_addc(&md, 'a'), KEEL_OK);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(keel_buf_adds(&md, "\xe6\xbc\xa2"), KEEL_OK);  /* 漢 */
    ck_assert_int_eq(ingest_chunk_markdown(md.data, md.len, &chunks), KEEL_OK);
    ck_assert_uint_ge(chunks.n, 3);
    for (size_t i = 0; i < chunks.n; i++) {
        size_t len = strlen(chunks.items[i].text);
        ck_assert_uint_le(len, INGEST_CHUNK_TARGET);
        ck_assert_uint_eq(utf8_valid_prefix(chunks.items[i].text, len), len);
        total += len;
    }
    ck_assert_uint_eq(total, md.len);  /* nothing lost at the cuts */
    ingest_chunks_release(&chunks);
    keel_buf_release(&md);
}
END_TEST

/* A heading past 256 bytes is cut at a character, not reported as an error. */
START_TEST(test_chunk_long_heading_is_truncated)
{
    struct keel_buf md;
    struct ingest_chunks chunks;
    size_t len;

    keel_buf_init(&md, 0);
    ck_assert_int_eq(keel_buf_adds(&md, "# x"), KEEL_OK);
    while (md.len < 5000)
        ck_assert_int_eq(keel_buf_adds(&md, "\xe6\xbc\xa2"), KEEL_OK);
    ck_assert_int_eq(keel_buf_adds(&md, "\n\nBody.\n\n## Sub\n\nMore.\n"), KEEL_OK);
    ck_assert_int_eq(ingest_chunk_markdown(md.data, md.len, &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 2);
    len = strlen(chunks.items[0].section);
    ck_assert_uint_le(len, 256);
    ck_assert_uint_ge(len, 254);
    ck_assert_uint_eq(utf8_valid_prefix(chunks.items[0].section, len), len);
    ck_assert_str_eq(chunks.items[0].text, "Body.");
    ck_assert_ptr_nonnull(strstr(chunks.items[1].section, " > Sub"));
    ingest_chunks_release(&chunks);
    keel_buf_release(&md);
}
END_TEST

START_TEST(test_chunk_whitespace_line_is_blank)
{
    const char *md = "para one\n   \t\npara two\n \n# Head\n";
    struct ingest_chunks chunks;

    ck_assert_int_eq(ingest_chunk_markdown(md, strlen(md), &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 1);
    ck_assert_str_eq(chunks.items[0].text, "para one\n\npara two");
    ingest_chunks_release(&chunks);
}
END_TEST

START_TEST(test_chunk_code_fence_has_no_headings)
{
    const char *md = "# Setup\n\nRun this:\n\n```sh\n# install\nmake\n\nmake test\n```\n\n"
                     "~~~\n## not either\n~~~\nDone.\n";
    struct ingest_chunks chunks;

    ck_assert_int_eq(ingest_chunk_markdown(md, strlen(md), &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 1);
    ck_assert_str_eq(chunks.items[0].section, "Setup");
    ck_assert_ptr_nonnull(strstr(chunks.items[0].text, "# install\nmake\n\nmake test\n```"));
    ck_assert_ptr_nonnull(strstr(chunks.items[0].text, "## not either"));
    ck_assert_ptr_nonnull(strstr(chunks.items[0].text, "Done."));
    ingest_chunks_release(&chunks);
}
END_TEST

START_TEST(test_chunk_heading_closing_hashes)
{
    const char *md = "## Using C#\n\none\n\n## Closed ##\n\ntwo\n\n# F#  #\n\nthree\n";
    struct ingest_chunks chunks;

    ck_assert_int_eq(ingest_chunk_markdown(md, strlen(md), &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 3);
    ck_assert_str_eq(chunks.items[0].section, "Using C#");
    ck_assert_str_eq(chunks.items[1].section, "Closed");
    ck_assert_str_eq(chunks.items[2].section, "F#");
    ingest_chunks_release(&chunks);
}
END_TEST

START_TEST(test_html_to_text)
{
    const char *html = "<html><head><title>Appeals &amp; reviews</title><style>p{x}</style>"
                       "<script>var a = '<p>';</script></head><body><h1>Appeal</h1>"
                       "<p>You can appeal&nbsp;a <b>denial</b>.</p></body></html>";
    char *text, *title;

    ck_assert_int_eq(ingest_html_to_text(html, strlen(html), &text, &title), KEEL_OK);
    ck_assert_str_eq(title, "Appeals & reviews");
    ck_assert_ptr_nonnull(strstr(text, "You can appeal a denial."));
    ck_assert_ptr_null(strstr(text, "var a"));
    ck_assert_ptr_null(strstr(text, "p{x}"));
    ck_assert_ptr_null(strstr(text, "<"));
    keel_free(text);
    keel_free(title);
}
END_TEST

START_TEST(test_html_text_and_tags)
{
    const char *html = "<header>Site</header><h2>Costs</h2><p>a < b and c > d, 1<2.</p>"
                       "<p>pre<progress>gress</progress>ing <b>bold</b><br>next</p>"
                       "<table><tr><td>Plan</td><td>Cost</td></tr><tr><th>A</th><th>B</th></tr>"
                       "</table><!-- a <p> comment --><ul><li>one</li><li>two</li></ul>";
    char *text, *title;
    struct ingest_chunks chunks;

    ck_assert_int_eq(ingest_html_to_text(html, strlen(html), &text, &title), KEEL_OK);
    ck_assert_ptr_null(title);
    ck_assert_ptr_nonnull(strstr(text, "\n\n## Costs\n\n"));
    ck_assert_ptr_null(strstr(text, "# Site"));
    ck_assert_ptr_nonnull(strstr(text, "a < b and c > d, 1<2."));
    ck_assert_ptr_nonnull(strstr(text, "pregressing bold"));
    ck_assert_ptr_nonnull(strstr(text, "bold\n\nnext"));
    ck_assert_ptr_nonnull(strstr(text, "Plan Cost"));
    ck_assert_ptr_nonnull(strstr(text, "A B"));
    ck_assert_ptr_null(strstr(text, "comment"));
    ck_assert_ptr_nonnull(strstr(text, "one\n\n"));
    ck_assert_int_eq(ingest_chunk_markdown(text, strlen(text), &chunks), KEEL_OK);
    ck_assert_uint_eq(chunks.n, 2);
    ck_assert_ptr_null(chunks.items[0].section);
    ck_assert_str_eq(chunks.items[0].text, "Site");
    ck_assert_str_eq(chunks.items[1].section, "Costs");
    ingest_chunks_release(&chunks);
    keel_free(text);
}
END_TEST

START_TEST(test_html_numeric_entities)
{
    const char *html = "<p>It&#8217;s &#x27;ok&#X27; &#128512;|&#0;|&#xD800;|&#x110000;|"
                       "&#99999999999999999999;|&#;|&#x;</p>";
    char *text, *title;

    ck_assert_int_eq(ingest_html_to_text(html, strlen(html), &text, &title), KEEL_OK);
    ck_assert_ptr_nonnull(strstr(text, "It\xe2\x80\x99s 'ok' \xf0\x9f\x98\x80|||||&#;|&#x;"));
    ck_assert_uint_eq(utf8_valid_prefix(text, strlen(text)), strlen(text));
    keel_free(text);
}
END_TEST

START_TEST(test_html_title_is_tidied)
{
    struct keel_buf html;
    char *text, *title;
    size_t len;

    keel_buf_init(&html, 0);
    ck_assert_int_eq(keel_buf_adds(&html, "<title>\n  Appeals\t\n and &amp;  reviews  </title>"),
                     KEEL_OK);
    ck_assert_int_eq(ingest_html_to_text(html.data, html.len, &text, &title), KEEL_OK);
    ck_assert_str_eq(title, "Appeals and & reviews");
    keel_free(text);
    keel_free(title);

    keel_buf_reset(&html);
    ck_assert_int_eq(keel_buf_adds(&html, "<title>ab"), KEEL_OK);
    for (int i = 0; i < 2000; i++)
        ck_assert_int_eq(keel_buf_adds(&html, "\xe6\xbc\xa2"), KEEL_OK);
    ck_assert_int_eq(keel_buf_adds(&html, "</title><p>body</p>"), KEEL_OK);
    ck_assert_int_eq(ingest_html_to_text(html.data, html.len, &text, &title), KEEL_OK);
    len = strlen(title);
    ck_assert_uint_le(len, 1024);
    ck_assert_uint_ge(len, 1021);
    ck_assert_uint_eq(utf8_valid_prefix(title, len), len);
    ck_assert_ptr_nonnull(strstr(text, "body"));
    keel_free(text);
    keel_free(title);
    keel_buf_release(&html);
}
END_TEST

START_TEST(test_html_out_of_memory)
{
    const char *html = "<title> T &amp; U </title><h1>A</h1><p>x &#8217; y</p>";
    int succeeded = 0;

    for (long n = 0; n < 50; n++) {
        char *text, *title;
        int rc;
        keel_alloc_fail_after(n, 0);
        rc = ingest_html_to_text(html, strlen(html), &text, &title);
        keel_alloc_fail_after(-1, 0);
        ck_assert(rc == KEEL_OK || rc == KEEL_ENOMEM);
        if (rc == KEEL_OK)
            succeeded = 1;
        else
            ck_assert(!text && !title);
        keel_free(text);
        keel_free(title);
    }
    ck_assert(succeeded);
}
END_TEST

Suite *suite_ingest(void)
{
    Suite *s = suite_create("ingest");
    TCase *papers = tcase_create("papers"), *chunks = tcase_create("chunks");

    unit_leak_fixture(papers);
    tcase_add_test(papers, test_paper_s2orc_shape);
    tcase_add_test(papers, test_paper_other_shapes);
    tcase_add_test(papers, test_paper_errors_name_the_field);
    tcase_add_test(papers, test_paper_csl_json_issued);
    tcase_add_test(papers, test_bibtex_entries);
    tcase_add_test(papers, test_bibtex_broken_entries_are_skipped_with_their_line);
    tcase_add_test(papers, test_bibtex_unclosed_entry_does_not_swallow_the_next);
    tcase_add_test(papers, test_bibtex_caps);
    suite_add_tcase(s, papers);
    unit_leak_fixture(chunks);
    tcase_add_test(chunks, test_chunk_sections_and_paragraphs);
    tcase_add_test(chunks, test_chunk_long_text_is_cut_at_spaces);
    tcase_add_test(chunks, test_chunk_out_of_memory);
    tcase_add_test(chunks, test_chunk_cut_keeps_utf8);
    tcase_add_test(chunks, test_chunk_long_heading_is_truncated);
    tcase_add_test(chunks, test_chunk_whitespace_line_is_blank);
    tcase_add_test(chunks, test_chunk_code_fence_has_no_headings);
    tcase_add_test(chunks, test_chunk_heading_closing_hashes);
    tcase_add_test(chunks, test_html_to_text);
    tcase_add_test(chunks, test_html_text_and_tags);
    tcase_add_test(chunks, test_html_numeric_entities);
    tcase_add_test(chunks, test_html_title_is_tidied);
    tcase_add_test(chunks, test_html_out_of_memory);
    suite_add_tcase(s, chunks);
    return s;
}
