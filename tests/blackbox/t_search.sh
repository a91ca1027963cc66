# keel search and keel chat --providers against keel-fake-http, a scripted
# local server ($FAKE_HTTP) standing in for OpenAlex and Semantic Scholar:
# the exact URLs each decision produces, merged papers, and each failure
# ending in a report and a finished search or turn. One test replays the
# real recorded answers of ../shared/data and skips when they are absent.

FAKE_HTTP=${FAKE_HTTP:-$(dirname "$KEEL")/keel-fake-http}

OA_BODY='{"meta": {}, "results": [
 {"id": "https://openalex.org/W1", "doi": "https://doi.org/10.1/shared",
  "title": "Sleep and social media in adolescents", "publication_year": 2023,
  "open_access": {"is_oa": true, "oa_url": "https://oa.example/1.pdf"},
  "primary_location": {"source": {"display_name": "Sleep Health"}},
  "authorships": [{"author": {"display_name": "Ada Author"}}],
  "abstract_inverted_index": {"Teens": [0], "sleep": [1], "less": [2]}},
 {"id": "https://openalex.org/W2", "title": "Screen time at night", "publication_year": 2024,
  "open_access": {"is_oa": false}}]}'
S2_BODY='{"total": 2, "offset": 0, "data": [
 {"paperId": "s2-a", "title": "Sleep and Social Media in Adolescents", "year": 2023,
  "externalIds": {"DOI": "10.1/SHARED"}, "isOpenAccess": true},
 {"paperId": "s2-c", "title": "Blue light and melatonin", "year": 2022, "venue": "Chronobiology",
  "isOpenAccess": true, "openAccessPdf": {"url": "https://s2.example/c.pdf"}}]}'

# fake_start ARGS…: starts keel-fake-http with routes; sets $FAKE_URL.
fake_start() {
    rm -f "$TMP/fake.port" "$TMP/fake.log"
    "$FAKE_HTTP" --port-file "$TMP/fake.port" --log "$TMP/fake.log" "$@" &
    FAKE_PID=$!
    bg_track "$FAKE_PID"   # stopped also when the test fails early
    i=0
    while [ ! -s "$TMP/fake.port" ]; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { echo "keel-fake-http did not start"; return 1; }
        sleep 0.05
    done
    FAKE_URL="http://127.0.0.1:$(cat "$TMP/fake.port")"
    export KEEL_OPENALEX_URL="$FAKE_URL" KEEL_SEMANTICSCHOLAR_URL="$FAKE_URL"
    unset KEEL_PROVIDERS
}

fake_stop() {
    kill "$FAKE_PID" 2>/dev/null || true
    wait "$FAKE_PID" 2>/dev/null || true
}

bodies() {
    printf '%s' "$OA_BODY" > "$TMP/oa.json"
    printf '%s' "$S2_BODY" > "$TMP/s2.json"
}

test_search_sends_native_filters() {
    bodies
    fake_start --route /works --reply "200 @$TMP/oa.json" \
               --route /graph/v1/paper/search --reply "200 @$TMP/s2.json"
    run "$KEEL" search "sleep & social media" --from 2020 --to 2024 --oa --limit 3 --json
    fake_stop
    expect_rc 0
    # The exact requests: years and open access as each API's filters,
    # never in the query text; twice the count asked of each.
    grep -qxF '/works?search=sleep+%26+social+media&filter=from_publication_date:2020-01-01,to_publication_date:2024-12-31,is_oa:true&per_page=6' "$TMP/fake.log" ||
        fail "OpenAlex URL: $(cat "$TMP/fake.log")"
    grep -qxF '/graph/v1/paper/search?query=sleep+%26+social+media&year=2020-2024&openAccessPdf=&limit=6&fields=title,abstract,year,venue,journal,authors,externalIds,url,isOpenAccess,openAccessPdf' "$TMP/fake.log" ||
        fail "Semantic Scholar URL: $(cat "$TMP/fake.log")"
    # The DOI twin is one paper from both; the closed paper is gone.
    expect_json '[.papers[] | .title]' '["Sleep and social media in adolescents","Blue light and melatonin"]'
    expect_json '.papers[0].providers' '["openalex","semanticscholar"]'
    expect_json '.papers[0].ids' '{"openalex":"https://openalex.org/W1","semanticscholar":"s2-a"}'
    expect_json '.papers[0].abstract' '"Teens sleep less"'
    expect_json '[.providers[] | .status]' '["ok","ok"]'
    expect_json '.request' '{"limit":3,"open_access":true,"query":"sleep & social media","year_from":2020,"year_to":2024}'
}

test_search_text_output_and_one_provider() {
    bodies
    fake_start --route /works --reply "200 @$TMP/oa.json"
    run "$KEEL" search "sleep" --provider openalex
    fake_stop
    expect_rc 0
    expect_out "1. Sleep and social media in adolescents (2023) — Sleep Health"
    expect_out "https://doi.org/10.1/shared"
    expect_out "from: openalex"
    expect_err "openalex: ok, 2 papers, HTTP 200, 1 attempt"
    [ "$(wc -l < "$TMP/fake.log")" -eq 1 ] || fail "asked more than OpenAlex: $(cat "$TMP/fake.log")"
}

test_search_one_provider_failing_degrades() {
    bodies
    fake_start --route /works --reply "200 @$TMP/oa.json" \
               --route /graph/v1/paper/search --reply "500 text=oops"
    run "$KEEL" search "sleep" --json
    fake_stop
    expect_rc 0
    expect_json '[.providers[] | {provider, status, reason}]' '[{"provider":"openalex","status":"ok","reason":""},{"provider":"semanticscholar","status":"failed","reason":"HTTP 500"}]'
    expect_json '.providers[1].attempts' '3'
    expect_json '.papers | length' '2'
}

test_search_filter_rejected_retried_without() {
    bodies
    fake_start --route /works --reply "400 text={\"error\": \"Invalid query parameters error.\"}" \
               --reply "200 @$TMP/oa.json"
    run "$KEEL" search "sleep" --from 2024 --provider openalex --json
    fake_stop
    expect_rc 0
    expect_json '.providers[0].status' '"ok_without_filters"'
    expect_json '.providers[0].reason' '"rejected the filters (HTTP 400); asked again without them"'
    expect_json '.providers[0].urls | length' '2'
    # The year filter still holds, applied here: only the 2024 paper.
    expect_json '[.papers[] | .year]' '[2024]'
}

test_search_failures_each_reported() {
    bodies
    fake_start --route /works --reply "200 @$TMP/oa.json cut"
    run "$KEEL" search "sleep" --provider openalex --json
    expect_rc 1
    expect_json '.providers[0].reason' '"the answer was cut short"'
    expect_err "every provider failed"
    fake_stop

    fake_start --route /works --reply "200 text={\"results\": ["
    run "$KEEL" search "sleep" --provider openalex --json
    fake_stop
    expect_rc 1
    expect_json '.providers[0].reason | startswith("the answer is not valid OpenAlex JSON")' 'true'

    fake_start --route /works --reply "404 text={\"error\": \"not found\"}"
    run "$KEEL" search "sleep" --provider openalex
    fake_stop
    expect_rc 1
    expect_err "openalex: failed, HTTP 404, 1 attempt — HTTP 404"
}

test_search_rate_limited_then_answers() {
    bodies
    fake_start --route /works --reply "429 retry-after=1 text={}" --reply "200 @$TMP/oa.json"
    run "$KEEL" search "sleep" --provider openalex --json
    fake_stop
    expect_rc 0
    expect_json '.providers[0].attempts' '2'
    expect_json '.providers[0].status' '"ok"'
    [ "$(wc -l < "$TMP/fake.log")" -eq 2 ] || fail "expected 2 requests"
}

test_search_usage_errors() {
    run "$KEEL" search
    expect_rc 2
    expect_err "one QUERY is required"
    run "$KEEL" search "x" --from 20x
    expect_rc 2
    expect_err "--from: must be a year"
    run "$KEEL" search "x" --from 2024 --to 2020
    expect_rc 2
    run "$KEEL" search "x" --limit 0
    expect_rc 2
    run "$KEEL" search "x" --provider scopus
    expect_rc 2
    expect_err 'unknown provider "scopus"'
    export KEEL_OPENALEX_URL=ftp://x
    run "$KEEL" search "x"
    unset KEEL_OPENALEX_URL
    expect_rc 2
    expect_err "KEEL_OPENALEX_URL: must be an http:// or https:// URL"
}

test_chat_with_providers_degrades_and_logs() {
    bodies
    fake_start --route /works --reply "200 @$TMP/oa.json" \
               --route /graph/v1/paper/search --reply "503 text=busy"
    db="$TMP/providers.db"
    printf 'find recent open access papers on sleep and social media\n' > "$TMP/in.txt"
    export KEEL_NOW=2026-02-07T12:00:00Z
    run "$KEEL" chat --db "$db" --providers openalex,semanticscholar --json < "$TMP/in.txt"
    fake_stop
    expect_rc 0
    expect_json '.tools_called' '["search_papers"]'
    expect_json '.tool_args.search_papers.query' '"sleep and social media"'
    expect_out "Sleep and social media in adolescents"
    expect_json '[.providers[] | {provider, status}]' '[{"provider":"local","status":"ok"},{"provider":"openalex","status":"ok"},{"provider":"semanticscholar","status":"failed"}]'
    expect_json '.answer | endswith("\n\nNote: Semantic Scholar did not answer, so these results may be incomplete.")' 'true'
    grep -qF '/works?search=sleep+and+social+media&filter=from_publication_date:2022-01-01,to_publication_date:2026-12-31,is_oa:true' "$TMP/fake.log" ||
        fail "OpenAlex URL: $(cat "$TMP/fake.log")"
    # The decision log and the user-level event tell the failure.
    got=$(sqlite3 "$db" "SELECT json_extract(decision, '\$.providers[2].reason') FROM decisions")
    [ "$got" = "HTTP 503" ] || fail "decision log: $got"
    got=$(sqlite3 "$db" "SELECT json_extract(e.value, '\$.level') || '|' || json_extract(e.value, '\$.user_message') FROM turns, json_each(turns.events) AS e WHERE json_extract(e.value, '\$.message') LIKE 'semanticscholar failed%'")
    [ "$got" = "both|A paper source did not answer; the results may be incomplete." ] ||
        fail "event: $got"
}

test_search_replays_recorded_answers() {
    answers="$root/../shared/data/api_responses"
    if [ ! -d "$answers" ]; then
        echo "skipped: $answers is absent"
        return 0
    fi
    fake_start --route /works --reply "200 @$answers/openalex_peneira/works.json" \
               --route /graph/v1/paper/search --reply "200 cassette=$answers/semanticscholar/test_search_paper_year_range.yaml#0"
    run "$KEEL" search "machine learning public health" --limit 20 --json
    fake_stop
    expect_rc 0
    expect_json '.providers[0].papers' '49'
    expect_json '.papers | length' '20'
    expect_json '[.papers[] | .title | length > 0] | all' 'true'
    expect_json '[.papers[] | select(.doi != null) | .doi | startswith("10.")] | all' 'true'
}

test_chat_finishes_the_turn_through_each_failure() {
    bodies
    # A copy of the packs whose OpenAlex gives up after 500 ms, as a
    # deployment would set it in its pack.
    mkdir -p "$TMP/packs"
    cp -R "$root/packs/scholar" "$TMP/packs/"
    sed -i 's/^    timeout_ms: 8000$/    timeout_ms: 500/' "$TMP/packs/scholar/pack.yaml"
    grep -q 'timeout_ms: 500' "$TMP/packs/scholar/pack.yaml" || fail "could not set the timeout"
    export KEEL_PACKS="$TMP/packs" KEEL_NOW=2026-02-07T12:00:00Z
    n=0
    for case in "400 text={}|HTTP 400" "404 text={}|HTTP 404" \
                "429 retry-after=1 text={}|rate limited (HTTP 429) after 3 attempts" \
                "500 text=oops|HTTP 500" "200 @$TMP/oa.json delay=3000|no answer within 500 ms" \
                "200 @$TMP/oa.json cut|the answer was cut short" \
                "200 text={\"results\": [|the answer is not valid OpenAlex JSON"; do
        n=$((n + 1))
        spec=${case%%|*}
        reason=${case#*|}
        fake_start --route /works --reply "$spec"
        db="$TMP/failure$n.db"
        printf 'find recent papers on sleep and social media\n' > "$TMP/in.txt"
        run "$KEEL" chat --db "$db" --providers openalex --json < "$TMP/in.txt"
        fake_stop
        expect_rc 0
        expect_json '.tools_called' '["search_papers"]'
        expect_json '.providers[1].status' '"failed"'
        expect_json ".providers[1].reason | startswith(\"$reason\")" 'true'
        # the library's papers still answer
        expect_json '.answer | length > 0' 'true'
        got=$(sqlite3 "$db" "SELECT count(*) FROM turns, json_each(turns.events) AS e WHERE json_extract(e.value, '\$.user_message') = 'A paper source did not answer; the results may be incomplete.'")
        [ "$got" = 1 ] || fail "case $spec: $got user-level failure events"
    done
}
