# The assistant pack's routes (seed 001 §2) through the real binary:
# commands, personal facts per user, conversions, web search against
# keel-fake-http standing in for a SearxNG server, and personal facts
# over HTTP for two API keys (two users whose facts never meet).

FAKE_HTTP=${FAKE_HTTP:-$(dirname "$KEEL")/keel-fake-http}

SEARX_BODY='{"query": "rust release", "number_of_results": 3, "results": [
 {"title": "Rust 1.99 released", "url": "https://blog.example/rust-1-99",
  "content": "The Rust team announced version 1.99 today. It brings faster builds.", "engine": "x"},
 {"title": "No URL here", "content": "dropped"},
 {"title": "Not the web", "url": "ftp://files.example/rust", "content": "dropped too"},
 {"title": "Rust news roundup", "url": "https://news.example/rust", "content": "Weekly notes."}]}'

# searx_start ARGS…: keel-fake-http as the search endpoint; sets $SEARX.
searx_start() {
    rm -f "$TMP/searx.port" "$TMP/searx.log"
    "$FAKE_HTTP" --port-file "$TMP/searx.port" --log "$TMP/searx.log" "$@" &
    SEARX_PID=$!
    bg_track "$SEARX_PID"
    i=0
    while [ ! -s "$TMP/searx.port" ]; do
        i=$((i + 1))
        [ "$i" -lt 200 ] || { echo "keel-fake-http did not start"; return 1; }
        sleep 0.05
    done
    SEARX="http://127.0.0.1:$(cat "$TMP/searx.port")"
}

searx_stop() {
    kill "$SEARX_PID" 2>/dev/null || true
    wait "$SEARX_PID" 2>/dev/null || true
}

# chat_lines DB [ARGS…] < lines: keel chat --pack assistant --json.
chat_json() {
    db=$1
    shift
    run "$KEEL" chat --pack assistant --db "$db" --json --now 2026-11-25T12:00:00Z "$@"
}

test_assistant_personal_facts_persist_per_user() {
    db="$TMP/a1.db"
    printf 'remember that my favourite drink is tea\n' > "$TMP/in"
    chat_json "$db" < "$TMP/in"
    expect_rc 0
    expect_json '.decision.route' '"local_memory_intent"'
    expect_json '.tools_called' '["remember_fact"]'
    expect_json '.answer' '"Got it: your favourite drink is tea. I'"'"'ll remember that."'
    # stored in the same transaction as the turn, for user "local"
    [ "$(sqlite3 "$db" "SELECT user || '|' || key || '|' || value || '|' || kind FROM personal_facts")" = \
      "local|favourite drink|tea|fact" ] || fail "stored: $(sqlite3 "$db" 'SELECT * FROM personal_facts')"
    # another process, another conversation: still known; a later value replaces it
    printf "what's my favourite drink?\nmy favorite drink is coffee\n" > "$TMP/in"
    chat_json "$db" < "$TMP/in"
    expect_rc 0
    [ "$(printf '%s\n' "$OUT" | jq -r .answer | head -n 1)" = "Your favourite drink is tea." ] ||
        fail "recall"
    printf '%s\n' "$OUT" | tail -n 1 | grep -qF 'now coffee (it was tea)' || fail "replace"
    # --user: another person's facts
    printf "what's my favourite drink?\n" > "$TMP/in"
    chat_json "$db" --user ada < "$TMP/in"
    expect_json '.answer | startswith("I don'"'"'t know your favourite drink")' 'true'
    # a guest reads but may not store
    printf 'my favourite drink is milk\n' > "$TMP/in"
    chat_json "$db" --role guest < "$TMP/in"
    expect_json '.tools_called' '[]'
    expect_json '.answer | contains("guest")' 'true'
    [ "$(sqlite3 "$db" "SELECT value FROM personal_facts WHERE user = 'local'")" = coffee ] ||
        fail "a guest changed a fact"
    # refused: nothing stored
    printf 'remember that my password is hunter2\n' > "$TMP/in"
    chat_json "$db" < "$TMP/in"
    expect_json '.answer | startswith("I won'"'"'t store that")' 'true'
    [ "$(sqlite3 "$db" "SELECT count(*) FROM personal_facts")" = 1 ] || fail "a password was stored"
    # forget
    printf 'forget my favourite drink\n' > "$TMP/in"
    chat_json "$db" < "$TMP/in"
    expect_json '.tools_called' '["forget_fact"]'
    [ "$(sqlite3 "$db" "SELECT count(*) FROM personal_facts")" = 0 ] || fail "not forgotten"
}

test_assistant_commands_and_stop_ends_the_chat() {
    db="$TMP/a2.db"
    printf 'remember that my favourite drink is tea\nmemory doctor\nhelp\nstop\nwhat is my favourite drink\n' > "$TMP/in"
    chat_json "$db" < "$TMP/in"
    expect_rc 0
    # stop answered and ended the chat: the line after it never ran
    [ "$(printf '%s\n' "$OUT" | wc -l)" -eq 4 ] || fail "lines: $(printf '%s\n' "$OUT" | wc -l)"
    printf '%s\n' "$OUT" | sed -n 2p | jq -e '.answer | contains("1 fact and 0 notes") and contains("Run memory: off")' > /dev/null ||
        fail "doctor"
    printf '%s\n' "$OUT" | sed -n 2p | jq -e '.tools_called == [] and .decision.route == "command"' > /dev/null ||
        fail "the doctor ran a tool"
    printf '%s\n' "$OUT" | sed -n 3p | jq -e '.answer | contains("memory doctor")' > /dev/null || fail "help"
    printf '%s\n' "$OUT" | sed -n 4p | jq -e '.closing == true and (.answer | startswith("Goodbye"))' > /dev/null ||
        fail "stop"
    # not JSON: the closing line, then the resume hint on stderr
    printf 'quit\nhello\n' > "$TMP/in"
    run "$KEEL" chat --pack assistant --db "$db" < "$TMP/in"
    expect_rc 0
    expect_out "Goodbye!"
    printf '%s' "$OUT" | grep -qF "Hello!" && fail "the chat went on after quit"
    expect_err "resume with --conversation"
}

test_assistant_conversions() {
    printf 'convert 5 km to miles\n100 usd in eur\nconvert 5 km to parsecs\n5 km to kg\n1,000,000 yen to usd\n100 XYZ to eur\n' > "$TMP/in"
    chat_json mem: < "$TMP/in"
    expect_rc 0
    [ "$(printf '%s\n' "$OUT" | jq -r '.tools_called[0]' | sort -u)" = convert_units ] ||
        fail "tools"
    printf '%s\n' "$OUT" | sed -n 1p | jq -e '.answer == "5 kilometres = 3.10686 miles."' > /dev/null ||
        fail "km"
    printf '%s\n' "$OUT" | sed -n 2p |
        jq -e '.answer | contains("100 USD = 92.59 EUR.") and contains("as of 2026-11-01") and contains("not live")' > /dev/null ||
        fail "currency"
    printf '%s\n' "$OUT" | sed -n 3p | jq -e '.answer | contains("parsecs")' > /dev/null || fail "unknown"
    printf '%s\n' "$OUT" | sed -n 4p | jq -e '.answer | contains("length (km) to mass (kg)")' > /dev/null ||
        fail "incompatible"
    printf '%s\n' "$OUT" | sed -n 5p | jq -e '.answer | startswith("1,000,000 JPY = 6,646.15 USD.")' > /dev/null ||
        fail "grouped"
    printf '%s\n' "$OUT" | sed -n 6p |
        jq -e '.answer == "I don\u0027t have a rate for the currency \u201cXYZ\u201d."' > /dev/null || fail "XYZ"
}

test_assistant_websearch_through_the_port() {
    printf '%s' "$SEARX_BODY" > "$TMP/searx.json"
    searx_start --route /search --reply "200 @$TMP/searx.json"
    printf 'search the web for the latest rust release\n' > "$TMP/in"
    chat_json mem: --websearch-url "$SEARX/" < "$TMP/in"
    searx_stop
    expect_rc 0
    # the exact request: the policy's query, JSON format
    grep -qxF '/search?q=latest%20rust%20release&format=json' "$TMP/searx.log" ||
        fail "request: $(cat "$TMP/searx.log")"
    expect_json '.decision.route' '"websearch"'
    expect_json '.tools_called' '["web_search"]'
    expect_json '.tool_args.web_search' '{"count":5,"query":"latest rust release"}'
    # results without a title/http URL are dropped; the rest are numbered sources
    expect_json '[.sources[] | {n, kind, source}]' \
        '[{"n":1,"kind":"web","source":"https://blog.example/rust-1-99"},{"n":2,"kind":"web","source":"https://news.example/rust"}]'
    expect_json '.answer | contains("1. Rust 1.99 released: The Rust team announced version 1.99 today. [1]")' 'true'
    expect_json '.answer | contains("2. Rust news roundup: Weekly notes. [2]")' 'true'
}

test_assistant_websearch_fails_closed() {
    searx_start --route /search --reply "500 text=oops"
    printf 'search the web for rust\n' > "$TMP/in"
    KEEL_WEBSEARCH_URL="$SEARX" chat_json mem: < "$TMP/in"
    searx_stop
    expect_rc 0
    expect_json '.answer' '"The web search failed (the server answered HTTP 500), so I have no answer for “rust”."'
    expect_json '.sources' '[]'
    searx_start --route /search --reply "200 text=<html>not json</html>"
    KEEL_WEBSEARCH_URL="$SEARX" chat_json mem: < "$TMP/in"
    searx_stop
    expect_json '.answer | contains("the answer is not JSON")' 'true'
    # nothing listening: a connection failure, still an answer
    KEEL_WEBSEARCH_URL="http://127.0.0.1:9" chat_json mem: < "$TMP/in"
    expect_rc 0
    expect_json '.answer | startswith("The web search failed")' 'true'
    # not configured (--websearch-url none wins over the environment)
    KEEL_WEBSEARCH_URL="http://127.0.0.1:9" chat_json mem: --websearch-url none < "$TMP/in"
    expect_json '.answer' '"Web search is not configured, so I can'"'"'t look up “rust”."'
    # a bad URL is refused at start, naming the flag
    run "$KEEL" chat --pack assistant --db mem: --websearch-url ftp://x < "$TMP/in"
    expect_rc 1
    expect_err "websearch_url"
}

test_assistant_llm_only_without_a_model() {
    printf 'tell me a joke\n' > "$TMP/in"
    unset KEEL_LLM_URL
    chat_json mem: < "$TMP/in"
    expect_json '.decision.route' '"llm_only"'
    expect_json '.answer | startswith("No language model is configured")' 'true'
}

# A model configured but unreachable: one honest message, not "no model is
# configured" followed by "the model did not answer".
test_assistant_llm_only_with_an_unreachable_model() {
    printf 'tell me a joke\nhi\nthanks\nconvert 5km to miles\n' > "$TMP/in"
    chat_json mem: --llm-url http://127.0.0.1:1/v1 --llm-model x < "$TMP/in"
    expect_rc 0
    printf '%s\n' "$OUT" | sed -n 1p |
        jq -e '.decision.route == "llm_only" and
               (.answer | startswith("The language model did not answer, so I can\u0027t hold an open conversation right now.")) and
               (.answer | contains("No language model is configured") | not) and
               (.answer | contains("Note:") | not)' > /dev/null || fail "llm_only: $(printf '%s\n' "$OUT" | sed -n 1p | jq .answer)"
    printf '%s\n' "$OUT" | sed -n 2p |
        jq -e '(.answer | contains("did not answer")) and (.answer | contains("none is configured") | not)' > /dev/null ||
        fail "smalltalk"
    printf '%s\n' "$OUT" | sed -n 3p | jq -e '.answer | startswith("You\u0027re welcome!")' > /dev/null ||
        fail "thanks"
    printf '%s\n' "$OUT" | sed -n 4p | jq -e '.answer == "5 kilometres = 3.10686 miles."' > /dev/null ||
        fail "conversion"
}

test_assistant_personal_facts_over_http_per_api_key() {
    db="$TMP/a3.db"
    run "$KEEL" keys create --user ada --role editor --db "$db"
    ada=$OUT
    run "$KEEL" keys create --user bob --role editor --db "$db"
    bob=$OUT
    run "$KEEL" keys create --user ada --role viewer --db "$db"
    ada_viewer=$OUT
    SERVE_AUTH=keys serve_start "$db" --packs assistant
    auth_post "$ada" '/v1/chat?wait=1' '{"message": "remember that my favourite drink is tea"}'
    expect_code 200
    expect_json '.tools_called' '["remember_fact"]'
    auth_post "$bob" '/v1/chat?wait=1' '{"message": "my favourite drink is water"}'
    expect_code 200
    # each user gets their own, in new conversations too
    auth_post "$ada" '/v1/chat?wait=1' "{\"message\": \"what's my favourite drink?\"}"
    expect_json '.answer' '"Your favourite drink is tea."'
    auth_post "$bob" '/v1/chat?wait=1' "{\"message\": \"what's my favourite drink?\"}"
    expect_json '.answer' '"Your favourite drink is water."'
    auth_post "$bob" '/v1/chat?wait=1' '{"message": "what do you remember about me"}'
    expect_json '.answer | contains("tea")' 'false'
    # a viewer key of ada reads her facts but may not store
    auth_post "$ada_viewer" '/v1/chat?wait=1' '{"message": "my favourite drink is milk"}'
    expect_code 200
    expect_json '.tools_called' '[]'
    auth_post "$ada_viewer" '/v1/chat?wait=1' "{\"message\": \"what's my favourite drink?\"}"
    expect_json '.answer' '"Your favourite drink is tea."'
    serve_stop
    [ "$(sqlite3 "$db" "SELECT user || '=' || value FROM personal_facts ORDER BY user" | tr '\n' ' ')" = \
      "ada=tea bob=water " ] || fail "stored: $(sqlite3 "$db" 'SELECT * FROM personal_facts')"
}

test_assistant_with_a_model() {
    model_start
    db="$TMP/a4.db"
    # llm_only: the model composes
    model_script '[{"text": "Why did the chicken cross the road? To get to the other side."}]'
    printf 'tell me a joke\n' > "$TMP/in"
    chat_json "$db" --llm-url "$LLM" --llm-model fake-model < "$TMP/in"
    expect_rc 0
    expect_json '.decision.route' '"llm_only"'
    expect_json '.answer' '"Why did the chicken cross the road? To get to the other side."'
    n=$(model_requests | jq length)
    # a conversion is keel's own answer: the model is not asked
    printf 'convert 5 km to miles\n' > "$TMP/in"
    chat_json "$db" --llm-url "$LLM" --llm-model fake-model < "$TMP/in"
    expect_json '.answer' '"5 kilometres = 3.10686 miles."'
    expect_json '.model.answer.status' '"skipped"'
    [ "$(model_requests | jq length)" = "$n" ] || fail "the model was asked about a conversion"
    # the model may store a fact in open conversation: checked, staged, stored with the turn
    model_script '[{"tool_calls": [{"name": "remember_fact", "arguments": {"key": "favourite colour", "value": "blue"}}]},
                   {"text": "I will keep that in mind."}]'
    printf 'blue is the colour I like best, keep that in mind\n' > "$TMP/in"
    chat_json "$db" --llm-url "$LLM" --llm-model fake-model < "$TMP/in"
    expect_json '.decision.route' '"llm_only"'
    expect_json '.model.tool_calls[0].verdict' '"ran"'
    [ "$(sqlite3 "$db" "SELECT value FROM personal_facts WHERE key = 'favourite colour'")" = blue ] ||
        fail "the model's fact was not stored"
    # … but never for a guest, and never a secret
    model_script '[{"tool_calls": [{"name": "remember_fact", "arguments": {"key": "favourite colour", "value": "red"}}]},
                   {"text": "Fine."}]'
    chat_json "$db" --llm-url "$LLM" --llm-model fake-model --role guest < "$TMP/in"
    expect_json '.model.tool_calls[0].verdict' '"refused"'
    model_script '[{"tool_calls": [{"name": "remember_fact", "arguments": {"key": "bank password", "value": "x1"}}]},
                   {"text": "Fine."}]'
    chat_json "$db" --llm-url "$LLM" --llm-model fake-model < "$TMP/in"
    [ "$(sqlite3 "$db" "SELECT group_concat(key || '=' || value) FROM personal_facts")" = "favourite colour=blue" ] ||
        fail "stored: $(sqlite3 "$db" 'SELECT * FROM personal_facts')"
}

test_assistant_reset_starts_a_new_conversation() {
    printf 'convert 5 km to miles\nreset\nhello\n' > "$TMP/in"
    chat_json mem: < "$TMP/in"
    expect_rc 0
    [ "$(printf '%s\n' "$OUT" | jq -r .conversation_id | sort -u | wc -l)" -eq 2 ] || fail "one conversation"
    printf '%s\n' "$OUT" | sed -n 2p | jq -e '.reset == true and .turn == 2' > /dev/null || fail "reset"
    printf '%s\n' "$OUT" | sed -n 3p | jq -e '.turn == 1' > /dev/null || fail "not new"
}

test_assistant_websearch_unavailable_is_not_left_to_the_model() {
    model_start
    model_script '[{"text": "It is sunny and 21 degrees in Paris."}]'
    printf "what's the weather in Paris today\n" > "$TMP/in"
    chat_json mem: --llm-url "$LLM" --llm-model fake-model --websearch-url none < "$TMP/in"
    expect_rc 0
    expect_json '.decision.route' '"websearch"'
    expect_json '.answer | startswith("Web search is not configured")' 'true'
    expect_json '.answer | contains("sunny")' 'false'
    expect_json '.model.answer.status' '"skipped"'
    # with results, the model phrases them
    printf '%s' "$SEARX_BODY" > "$TMP/searx.json"
    searx_start --route /search --reply "200 @$TMP/searx.json"
    model_script '[{"text": "ok"}, {"text": "Rust 1.99 is out [1]."}]'
    printf 'search the web for the latest rust release\n' > "$TMP/in"
    chat_json mem: --llm-url "$LLM" --llm-model fake-model --websearch-url "$SEARX" < "$TMP/in"
    searx_stop
    # the policy ran the search the model did not call: the pack's line opens the reply
    expect_json '.answer' '"Searching the web now…\n\nRust 1.99 is out [1]."'
    expect_json '.model.answer.status' '"ok"'
    expect_json '.sources | length' '2'
}
