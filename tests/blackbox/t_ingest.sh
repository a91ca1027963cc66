# keel ingest: papers and documents into a SQLite store, idempotent,
# with warnings that name file and line. Tests on ../shared/data run
# only when it is there.

data="$root/../shared/data"

papers_json() {
    cat > "$TMP/papers.json" <<'JSON'
[{"title": "Sleep and memory consolidation", "abstract": "Sleep supports memory.", "year": 2021,
  "venue": "Nature", "authors": ["A. Author"], "doi": "10.1/SLEEP", "is_open_access": true},
 {"title": "Coral bleaching under heat stress", "year": 2019, "url": "http://x/coral"},
 {"abstract": "a record without a title"}]
JSON
}

test_ingest_papers_and_again() {
    papers_json
    run "$KEEL" ingest papers --db "$TMP/test_ingest_papers_and_again.db" "$TMP/papers.json"
    expect_rc 0
    expect_out "papers: 2 added, 0 updated, 0 unchanged, 1 skipped"
    expect_out "now holds 2 papers"
    # records are counted from 1, as a reader counts them
    expect_err "papers.json: record 3: skipped: title: is required"
    run "$KEEL" ingest papers --db "$TMP/test_ingest_papers_and_again.db" "$TMP/papers.json"
    expect_rc 0
    expect_out "papers: 0 added, 0 updated, 2 unchanged, 1 skipped"
    expect_out "now holds 2 papers"
}

test_ingest_json_lines_names_bad_line() {
    printf '{"title": "One"}\n\n{"title": oops}\n{"title": "Two", "year": 2020}\n' > "$TMP/p.jsonl"
    run "$KEEL" ingest papers --db "$TMP/test_ingest_json_lines_names_bad_line.db" "$TMP/p.jsonl"
    expect_rc 0
    expect_out "papers: 2 added, 0 updated, 0 unchanged, 1 skipped"
    # lines are counted from 1, and the column is within that line
    expect_err "p.jsonl: line 3: skipped: column 14: invalid token near 'oops'"
    printf '%s' "$ERR" | grep -q "line 1 column" && fail "a line's own position was reported"
    [ "$(printf '%s\n' "$ERR" | grep -c skipped)" = 1 ] || fail "one warning expected"
}

test_ingest_changed_record_is_updated() {
    printf '{"title": "One", "doi": "10.1/x", "year": 2020}\n' > "$TMP/a.jsonl"
    printf '{"title": "One (revised)", "doi": "10.1/X", "year": 2020}\n' > "$TMP/b.jsonl"
    run "$KEEL" ingest papers --db "$TMP/test_ingest_changed_record_is_updated.db" "$TMP/a.jsonl"
    run "$KEEL" ingest papers --db "$TMP/test_ingest_changed_record_is_updated.db" "$TMP/b.jsonl"
    expect_rc 0
    expect_out "papers: 0 added, 1 updated, 0 unchanged"
    expect_out "now holds 1 papers"
}

test_ingest_docs_front_matter_html_and_again() {
    mkdir -p "$TMP/corpus/sub"
    printf -- '---\ntitle: "How to appeal"\nlang: en\n---\n\n# Appeals\n\nYou can appeal a denial.\n\n## External review\n\nAn independent reviewer decides.\n' > "$TMP/corpus/appeal.md"
    printf '<html><title>Glossary</title><body><p>Grievance: a complaint.</p></body></html>' > "$TMP/corpus/sub/g.html"
    printf 'plain text file\n' > "$TMP/corpus/note.txt"
    printf 'ignored' > "$TMP/corpus/image.png"
    run "$KEEL" ingest docs --db "$TMP/test_ingest_docs_front_matter_html_and_again.db" "$TMP/corpus/"
    expect_rc 0
    expect_out "docs: 3 added, 0 updated, 0 unchanged, 0 skipped"
    expect_out "3 documents, 4 chunks"
    run "$KEEL" ingest docs --db "$TMP/test_ingest_docs_front_matter_html_and_again.db" "$TMP/corpus"
    expect_out "docs: 0 added, 0 updated, 3 unchanged"
}

test_ingest_repairs_non_utf8_and_bom() {
    mkdir -p "$TMP/latin"
    printf '# Caf\351\n\nLatin-1 text.\n' > "$TMP/latin/a.md"
    printf '\357\273\277---\ntitle: BOM doc\n---\nbody\n' > "$TMP/latin/b.md"
    run "$KEEL" ingest docs --db "$TMP/test_ingest_repairs_non_utf8_and_bom.db" "$TMP/latin"
    expect_rc 0
    expect_out "docs: 2 added"
    expect_err "a.md: bytes that are not UTF-8 were replaced by U+FFFD"
    sqlite3 "$TMP/test_ingest_repairs_non_utf8_and_bom.db" "select title from documents order by id" > "$TMP/titles"
    grep -qx "BOM doc" "$TMP/titles" || fail "the BOM hid the front matter: $(cat "$TMP/titles")"
}

test_ingest_same_input_other_spelling_is_unchanged() {
    papers_json
    mkdir -p "$TMP/c/sub" && printf '# A\n\ntext\n' > "$TMP/c/sub/a.md"
    db="$TMP/spelling.db"
    run "$KEEL" ingest papers --db "$db" "$TMP/papers.json"
    run "$KEEL" ingest docs --db "$db" "$TMP/c"
    cd "$TMP"
    run "$KEEL" ingest papers --db "$db" ./papers.json
    expect_out "papers: 0 added, 0 updated, 2 unchanged"
    run "$KEEL" ingest docs --db "$db" ./c/
    expect_out "docs: 0 added, 0 updated, 1 unchanged"
}

test_ingest_two_folders_do_not_collide() {
    mkdir -p "$TMP/da" "$TMP/db"
    printf '# A\n\nfirst readme\n' > "$TMP/da/README.md"
    printf '# B\n\nsecond readme\n' > "$TMP/db/README.md"
    run "$KEEL" ingest docs --db "$TMP/two.db" "$TMP/da" "$TMP/db"
    expect_out "docs: 2 added, 0 updated"
    run "$KEEL" ingest docs --db "$TMP/two.db" "$TMP/da" "$TMP/db"
    expect_out "docs: 0 added, 0 updated, 2 unchanged"
}

# A document's source is its path below the folder given, never the
# server's directories; its id is the folder's name and that path. So the
# same folder moved (or checked out elsewhere) is the same corpus:
# re-ingesting it changes nothing; folders of other names never collide.
test_ingest_docs_source_is_below_the_folder() {
    mkdir -p "$TMP/here/policies/sub" "$TMP/there" "$TMP/other/sub"
    printf '# Appeals\n\nYou can appeal.\n' > "$TMP/here/policies/sub/appeal.md"
    printf '# Other\n\nAnother corpus.\n' > "$TMP/other/sub/appeal.md"
    db="$TMP/below.db"
    run "$KEEL" ingest docs --db "$db" "$TMP/here/policies"
    expect_out "docs: 1 added"
    [ "$(sqlite3 "$db" "SELECT id || ' ' || source FROM documents")" = "policies/sub/appeal.md sub/appeal.md" ] ||
        fail "stored: $(sqlite3 "$db" "SELECT id, source FROM documents")"
    mv "$TMP/here/policies" "$TMP/there/"
    run "$KEEL" ingest docs --db "$db" "$TMP/there/policies/"
    expect_out "docs: 0 added, 0 updated, 1 unchanged"
    run "$KEEL" ingest docs --db "$db" "$TMP/other"
    expect_out "docs: 1 added, 0 updated, 0 unchanged"
    [ "$(sqlite3 "$db" "SELECT group_concat(id || ' ' || source, ',') FROM (SELECT * FROM documents ORDER BY id)")" = \
      "other/sub/appeal.md sub/appeal.md,policies/sub/appeal.md sub/appeal.md" ] ||
        fail "stored: $(sqlite3 "$db" "SELECT id, source FROM documents")"
    case "$(sqlite3 "$db" "SELECT source FROM documents")" in
        *"$TMP"*) fail "a stored source names the server's directories" ;;
    esac
}

test_ingest_same_doi_in_two_files() {
    printf '{"title": "One", "doi": "10.1/z"}\n' > "$TMP/pa.jsonl"
    printf '{"title": "One again", "doi": "10.1/Z"}\n' > "$TMP/pb.jsonl"
    run "$KEEL" ingest papers --db "$TMP/doi.db" "$TMP/pa.jsonl" "$TMP/pb.jsonl"
    expect_out "papers: 1 added, 0 updated, 0 unchanged, 1 skipped"
    run "$KEEL" ingest papers --db "$TMP/doi.db" "$TMP/pa.jsonl" "$TMP/pb.jsonl"
    expect_out "papers: 0 added, 0 updated, 1 unchanged, 1 skipped"
}

test_ingest_links_and_fifos_are_not_followed() {
    mkdir -p "$TMP/loop/sub"
    printf '# A\n\ntext\n' > "$TMP/loop/a.md"
    ln -s . "$TMP/loop/self"
    ln -s .. "$TMP/loop/sub/up"
    mkfifo "$TMP/loop/pipe.md"
    run timeout 20 "$KEEL" ingest docs --db "$TMP/loop.db" "$TMP/loop"
    expect_rc 0
    expect_out "docs: 1 added"
    expect_err "pipe.md: skipped: is not a regular file"
}

test_ingest_bom_papers_array_and_envelope() {
    printf '\357\273\277[\n {"title": "A"},\n {"title": "B"}\n]\n' > "$TMP/bom.json"
    run "$KEEL" ingest papers --db "$TMP/bom.db" "$TMP/bom.json"
    expect_out "papers: 2 added, 0 updated, 0 unchanged, 0 skipped"
    printf '{"results": [{"title": "C", "publication_year": 2020, "authorships": [{"author": {"display_name": "Ada L"}}]}]}' > "$TMP/openalex.json"
    run "$KEEL" ingest papers --db "$TMP/bom.db" "$TMP/openalex.json"
    expect_out "papers: 1 added"
    sqlite3 "$TMP/bom.db" "select authors from papers where title = 'C'" | grep -q "Ada L" || fail "authorships not read"
}

test_ingest_unclosed_front_matter_keeps_text() {
    mkdir -p "$TMP/fm"
    printf -- '---\ntitle: Unclosed\n\nFirst paragraph is important.\n\n---\n\nAfter the rule.\n' > "$TMP/fm/u.md"
    run "$KEEL" ingest docs --db "$TMP/fm.db" "$TMP/fm"
    expect_rc 0
    sqlite3 "$TMP/fm.db" "select group_concat(text, ' | ') from chunks" | grep -q "First paragraph is important" || fail "text before the rule was dropped"
}

test_ingest_goes_on_after_a_bad_argument() {
    papers_json
    run "$KEEL" ingest papers --db "$TMP/go.db" "$TMP/missing.json" "$TMP/papers.json"
    expect_rc 1
    expect_err "missing.json"
    expect_out "papers: 2 added"
    run "$KEEL" ingest papers --db
    expect_rc 2
    expect_err "--db needs a value"
}

test_ingest_errors() {
    run "$KEEL" ingest
    expect_rc 2
    run "$KEEL" ingest videos x
    expect_rc 2
    expect_err 'unknown kind "videos"'
    run "$KEEL" ingest papers --db "$TMP/test_ingest_errors.db" "$TMP/missing.json"
    expect_rc 1
    expect_err "missing.json"
    run "$KEEL" ingest docs --db "$TMP/test_ingest_errors.db" "$TMP/nodir"
    expect_rc 1
    expect_err "is not a directory"
    run "$KEEL" ingest papers --db "postgres://nowhere" "$TMP/x"
    expect_rc 1
    expect_err "unknown store"
}

test_ingest_into_memory_store() {
    papers_json
    run "$KEEL" ingest papers --db mem: "$TMP/papers.json"
    expect_rc 0
    expect_out "now holds 2 papers"
}

test_shared_data_papers() {
    if [ ! -f "$data/papers/beese_ai_papers_all.json" ]; then
        echo "skipped: ../shared/data is absent"
        return 0
    fi
    run "$KEEL" ingest papers --db "$TMP/test_shared_data_papers.db" "$data/papers/beese_ai_papers_all.json" \
        "$data/papers/s2orc_metadata_sample.jsonl"
    expect_rc 0
    added=$(printf '%s' "$OUT" | sed -n 's/^papers: \([0-9]*\) added.*/\1/p')
    [ "$added" -ge 2500 ] || fail "expected at least 2500 papers, got $added"
    run "$KEEL" ingest papers --db "$TMP/test_shared_data_papers.db" "$data/papers/beese_ai_papers_all.json"
    expect_out "papers: 0 added, 0 updated, 1550 unchanged, 0 skipped"
}

test_shared_data_corpus() {
    if [ ! -d "$data/corpus/healthcare_gov_2013/_posts" ]; then
        echo "skipped: ../shared/data is absent"
        return 0
    fi
    run "$KEEL" ingest docs --db "$TMP/test_shared_data_corpus.db" "$data/corpus/healthcare_gov_2013/_posts"
    expect_rc 0
    docs=$(printf '%s' "$OUT" | sed -n 's/.* \([0-9]*\) documents.*/\1/p')
    [ "$docs" -ge 950 ] || fail "expected at least 950 documents, got $docs"
    expect_err "skipped: no text"   # pages that are only front matter
    run "$KEEL" ingest docs --db "$TMP/test_shared_data_corpus.db" "$data/corpus/healthcare_gov_2013/_posts"
    expect_out "docs: 0 added, 0 updated, "
}

test_ingest_bibtex_and_again() {
    cat > "$TMP/refs.bib" <<'BIB'

% two lines before the first entry; line numbers still count from the top
@string{nat = "Nature"}
@article{lovelace2020,
  title = {The {Analytical} Engine --- a Review},
  author = {Lovelace, Ada and Babbage, Charles},
  journal = nat, year = 2020, doi = {10.1234/ae.2020},
}
@inproceedings{broken, title {no equals sign}}
@misc{garcia21, title = "Se{\~n}ales", author = {Garc{\'\i}a, Jos{\'e}}, date = {2021-05-01}}
BIB
    db="$TMP/test_ingest_bibtex.db"
    run "$KEEL" ingest papers --db "$db" "$TMP/refs.bib"
    expect_rc 0
    expect_out "papers: 2 added, 0 updated, 0 unchanged, 1 skipped"
    expect_err "refs.bib: line 9: skipped: a field name is not followed by ="
    got=$(sqlite3 "$db" "SELECT title || '|' || year || '|' || ifnull(venue, '') || '|' || authors FROM papers ORDER BY year")
    expected='The Analytical Engine — a Review|2020|Nature|["Ada Lovelace","Charles Babbage"]
Señales|2021||["José García"]'
    [ "$got" = "$expected" ] || fail "stored: $got"
    run "$KEEL" ingest papers --db "$db" "$TMP/refs.bib"
    expect_out "papers: 0 added, 0 updated, 2 unchanged, 1 skipped"
}

test_ingest_csl_json() {
    printf '[{"type": "article-journal", "title": "CSL paper", "container-title": ["J. Tests"], "issued": {"date-parts": [[2019, 3]]}, "author": [{"family": "Doe", "given": "Jane"}], "DOI": "10.1/csl"}]' > "$TMP/csl.json"
    db="$TMP/test_ingest_csl.db"
    run "$KEEL" ingest papers --db "$db" "$TMP/csl.json"
    expect_rc 0
    expect_out "papers: 1 added"
    got=$(sqlite3 "$db" "SELECT year || '|' || venue || '|' || doi FROM papers")
    [ "$got" = "2019|J. Tests|10.1/csl" ] || fail "stored: $got"
}
