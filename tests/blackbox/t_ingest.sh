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
    expect_err "papers.json: record 2: skipped: title: is required"
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
    expect_err "p.jsonl:3: skipped"
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
    expect_out "papers: 0 added, 0 updated, "
    expect_err "duplicate of an earlier record"
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
