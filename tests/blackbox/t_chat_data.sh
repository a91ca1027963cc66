# keel chat over the shared data sets in ../shared/data (beside the
# checkout): the healthcare.gov corpus for the payer pack, and paper
# metadata for the scholar pack. Each test is skipped with a message when
# its data is absent. The packs' sample data is not ingested: the store
# already holds documents (papers).

data="$root/../shared/data"

# chat_data PACK DB: keel chat --json on $TMP/in.txt, pinned clock.
chat_data() {
    export KEEL_NOW=2026-02-07T12:00:00Z
    run "$KEEL" chat --pack "$1" --db "$2" --json < "$TMP/in.txt"
}

test_chat_data_payer_on_healthcare_gov() {
    posts="$data/corpus/healthcare_gov_2013/_posts"
    if [ ! -d "$posts" ]; then
        echo "skipped: $posts is absent"
        return 0
    fi
    db="$TMP/chat_data_payer.db"
    run "$KEEL" ingest docs --db "$db" "$posts"
    expect_rc 0
    printf 'how do I file an appeal with Sunshine Health\n' > "$TMP/in.txt"
    chat_data payer "$db"
    expect_rc 0
    if printf '%s' "$ERR" | grep -q "sample records"; then
        fail "the sample corpus was ingested over the shared corpus"
    fi
    expect_json '.state.jurisdiction.payer' '"Sunshine Health"'
    expect_json '.clarification' 'null'
    expect_json '.tools_called' '["rag_search"]'
    expect_json '.answer | length > 0' 'true'
    expect_json '(.sources | length) > 0' 'true'
    # Every source is a passage of the ingested corpus, numbered from 1,
    # and the answer cites at least the first.
    # Its source is the path below the folder ingested, never the server's.
    expect_json '[.sources[] | .source == (.document_id | ltrimstr("_posts/"))] | all' 'true'
    expect_json '[.sources[] | .source | startswith("/") | not] | all' 'true'
    expect_json '[.sources[] | .n] == [range(1; (.sources | length) + 1)]' 'true'
    expect_json '[.sources[] | .title | type == "string"] | all' 'true'
    expect_json '.answer | test("\\[1\\]")' 'true'
    expect_json '.answer | test("appeal"; "i")' 'true'
    expect_json '[.sources[] | .band] - ["confident", "caution"] | length' '0'
}

# scholar_years_hold DB MESSAGE…: one scholar turn per message (JSON
# lines in $OUT), then checks every line: search_papers ran under a year
# filter (decision.search), and every returned paper (sources[]) has a
# known year inside it.
scholar_years_hold() {
    db=$1
    shift
    printf '%s\n' "$@" > "$TMP/in.txt"
    chat_data scholar "$db"
    expect_rc 0
    [ "$(printf '%s\n' "$OUT" | grep -c .)" -eq "$#" ] || fail "expected $# answers"
    printf '%s\n' "$OUT" > "$TMP/scholar.out"
    jq -e -s 'all(.[]; .tools_called == ["search_papers"] and .decision.search != null
                   and (.decision.search.year_from != null or .decision.search.year_to != null))' \
        "$TMP/scholar.out" > /dev/null || fail "a turn did not search with a year filter"
    bad=$(jq -c '.decision.search as $s | .sources[]
                 | select(.year == null
                          or ($s.year_from != null and .year < $s.year_from)
                          or ($s.year_to != null and .year > $s.year_to))
                 | {title, year, year_from: $s.year_from, year_to: $s.year_to}' \
             "$TMP/scholar.out") || fail "sources are not JSON"
    [ -z "$bad" ] || fail "sources outside the year filter: $bad"
    found=$(jq -s '[.[].sources | length] | add' "$TMP/scholar.out")
    [ "$found" -gt 0 ] || fail "no paper was returned at all"
}

test_chat_data_scholar_s2orc_years() {
    file="$data/papers/s2orc_metadata_sample.jsonl"
    if [ ! -f "$file" ]; then
        echo "skipped: $file is absent"
        return 0
    fi
    db="$TMP/chat_data_s2orc.db"
    run "$KEEL" ingest papers --db "$db" "$file"
    expect_rc 0
    scholar_years_hold "$db" \
        "find papers about cancer from 1990 to 2000" \
        "find papers about cancer published before 1985" \
        "find studies on children since 2010" \
        "find papers about treatment between 1995 and 2005"
}

test_chat_data_scholar_beese_years() {
    file="$data/papers/beese_ai_papers_all.json"
    if [ ! -f "$file" ]; then
        echo "skipped: $file is absent"
        return 0
    fi
    db="$TMP/chat_data_beese.db"
    run "$KEEL" ingest papers --db "$db" "$file"
    expect_rc 0
    scholar_years_hold "$db" \
        "find papers about language models published between 2020 and 2022" \
        "find papers on neural networks since 2021" \
        "show me 10 papers about reinforcement learning from 2019" \
        "find recent papers about transformers"
    # A count the policy asked for is the most papers returned.
    [ "$(printf '%s\n' "$OUT" | sed -n 3p | jq '.decision.search.count')" = 10 ] ||
        fail "\"10 papers\" did not set count 10"
    [ "$(printf '%s\n' "$OUT" | sed -n 3p | jq '.sources | length <= 10')" = true ] ||
        fail "more than 10 papers for \"10 papers\""
}
