/*
 * test_ingest.c — the pure parts of ingestion: paper records from the
 * JSON shapes real sources use, markdown chunking, HTML to text.
 */
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "ingest/ingest.h"
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
        {"{\"title\": \"T\", \"year\": \"soon\"}", "year"},
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
    for (long n = 0; n < 50; n++) {
        struct ingest_chunks chunks;
        int rc;
        keel_alloc_fail_after(n, 0);
        rc = ingest_chunk_markdown(md, strlen(md), &chunks);
        keel_alloc_fail_after(-1, 0);
        ck_assert(rc == KEEL_OK || rc == KEEL_ENOMEM);
        if (rc == KEEL_ENOMEM)
            ck_assert_uint_eq(chunks.n, 0);
        ingest_chunks_release(&chunks);
    }
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

Suite *suite_ingest(void)
{
    Suite *s = suite_create("ingest");
    TCase *papers = tcase_create("papers"), *chunks = tcase_create("chunks");

    unit_leak_fixture(papers);
    tcase_add_test(papers, test_paper_s2orc_shape);
    tcase_add_test(papers, test_paper_other_shapes);
    tcase_add_test(papers, test_paper_errors_name_the_field);
    suite_add_tcase(s, papers);
    unit_leak_fixture(chunks);
    tcase_add_test(chunks, test_chunk_sections_and_paragraphs);
    tcase_add_test(chunks, test_chunk_long_text_is_cut_at_spaces);
    tcase_add_test(chunks, test_chunk_out_of_memory);
    tcase_add_test(chunks, test_html_to_text);
    suite_add_tcase(s, chunks);
    return s;
}
