# The model responder through the real binary, against a scripted
# OpenAI-compatible server ($FAKE_OPENAI, tests/fake/fake_openai_main.c):
# every guardrail of the policy over the model, failing closed, streaming
# over both stream endpoints, and the request body keel sends upstream.

LLM_NOW=2026-11-24T12:00:00Z

# ask MESSAGE [ARGS…]: one turn of keel chat --json with the model; the
# turn's JSON in $OUT.
ask() {
    printf '%s\n' "$1" > "$TMP/ask.in"
    shift
    run "$KEEL" chat --json --now "$LLM_NOW" --llm-url "$LLM" --llm-model fake-model "$@" \
        < "$TMP/ask.in"
}

DIRECT='Can you find me recent papers on graph neural networks?'

test_llm_text_only_reply_still_runs_the_policy_search() {
    model_start
    model_script '[{"text": "Sure! Which years are you interested in?"},
                   {"text": "Two papers stand out [1] [2]."}]'
    ask "$DIRECT" --db mem:
    expect_rc 0
    expect_json '.tools_called' '["search_papers"]'
    policy_args=$(printf '%s' "$OUT" | jq -c '.tool_args.search_papers')
    expect_json '.model.forced_after_model' 'true'
    expect_json '.model.forced_reason' '"the model answered with text only"'
    expect_json '.answer | startswith("Searching for papers now…\n\nTwo papers stand out [1] [2].")' 'true'
    expect_json '.stage' '"finding_papers"'
    # The arguments are the policy's, exactly as without a model.
    printf '%s\n' "$DIRECT" > "$TMP/plain.in"
    run "$KEEL" chat --json --now "$LLM_NOW" --db mem: --llm-url none < "$TMP/plain.in"
    expect_json '.tool_args.search_papers' "$policy_args"
    expect_json '.model' 'null'
    printf '%s' "$policy_args" | jq -e '.year_from == 2022 and .year_to == 2026' > /dev/null ||
        fail "recent did not become 2022-2026: $policy_args"
}

test_llm_another_tool_then_a_question_still_ends_with_the_search() {
    model_start
    model_script '[{"tool_calls": [{"name": "add_to_library", "arguments": {"title": "A Survey of Graph Learning"}}]},
                   {"text": "Before I search: do you want only journal papers?"}]'
    ask "$DIRECT" --db "$TMP/other.db" --role editor
    expect_rc 0
    expect_json '.tools_called' '["add_to_library","search_papers"]'
    expect_json '.model.tool_calls[0].verdict' '"ran"'
    expect_json '.model.forced_reason' '"the model called other tools, not the policy'"'"'s"'
    expect_json '.answer | startswith("Searching for papers now…")' 'true'
    # The model cited nothing, so the search's results follow its words.
    expect_json '.answer | contains("I found 3 papers")' 'true'
    expect_json '.model.answer.extractive_appended | length > 0' 'true'
    expect_json '.sources | length' '3'
    # The write ran for the editor: the paper is in the library.
    library_has "$TMP/other.db" 'A Survey of Graph Learning'
}

# library_has DB TITLE: a search of the local library (no model) finds it.
library_has() {
    printf 'find papers on %s\n' "$2" > "$TMP/lib.in"
    run "$KEEL" chat --json --db "$1" --llm-url none < "$TMP/lib.in"
    expect_json "[.sources[].title] | index(\"$2\") != null" 'true'
}

test_llm_viewer_is_offered_no_write_tool_and_its_write_call_is_refused() {
    model_start
    model_script '[{"tool_calls": [{"name": "add_to_library", "arguments": {"title": "Zebra Paper Of Viewers"}}]},
                   {"text": "Here they are [1]."}]'
    ask "$DIRECT" --db "$TMP/viewer.db" --role viewer
    expect_rc 0
    expect_json '.model.tool_calls[0].verdict' '"refused"'
    expect_json '.model.tool_calls[0].reason' '"role viewer may not call add_to_library (write access)"'
    expect_json '.tools_called' '["search_papers"]'
    OUT=$(model_requests)
    expect_json '[.[0].tools[].function.name]' '["search_papers"]'
    library_has "$TMP/viewer.db" 'Zebra Paper Of Viewers' && fail "a viewer's write ran"
    # An editor is offered the write tool.
    model_script '[{"text": "ok"}, {"text": "Here [1]."}]'
    ask "$DIRECT" --db mem: --role editor
    OUT=$(model_requests)
    expect_json '[.[0].tools[].function.name]' '["search_papers","add_to_library"]'
}

test_llm_policy_overrides_the_models_search_arguments() {
    model_start
    model_script '[{"tool_calls": [{"name": "search_papers", "arguments": {"query": "gnn", "count": 2, "open_access_only": false}}]},
                   {"text": "Here are twelve [1]."}]'
    ask 'Find 12 open access papers on graph neural networks' --db mem:
    expect_rc 0
    expect_json '.tool_args.search_papers.count' '12'
    expect_json '.tool_args.search_papers.open_access_only' 'true'
    expect_json '.model.tool_calls[0].verdict' '"governed"'
    expect_json '.model.tool_calls[0].proposed' '{"count":2,"open_access_only":false,"query":"gnn"}'
    expect_json '.model.tool_calls[0].final.count' '12'
    expect_json '.model.tool_calls[0].final.open_access_only' 'true'
    # The model called the policy's tool: no forced line.
    expect_json '.model.forced_after_model' 'false'
    expect_json '.answer' '"Here are twelve [1]."'
    # Both sets of arguments are in the stored decision log.
    cid=$(printf '%s' "$OUT" | jq -r .conversation_id)
    [ -n "$cid" ]
}

test_llm_invalid_and_unknown_tool_calls_are_rejected_with_reasons() {
    model_start
    model_script '[{"tool_calls": [{"name": "search_papers", "arguments": {"query": "gnn", "count": "many"}},
                                   {"name": "search_papers", "arguments": "{\"query\": \"gnn\""},
                                   {"name": "delete_everything", "arguments": {}}]},
                   {"text": "Found [1]."}]'
    ask "$DIRECT" --db mem:
    expect_rc 0
    expect_json '[.model.tool_calls[].verdict]' '["invalid","invalid","refused"]'
    expect_json '.model.tool_calls[0].reason' '"args.count must be an integer, not string"'
    expect_json '.model.tool_calls[1].reason | startswith("the arguments are not JSON")' 'true'
    expect_json '.model.tool_calls[2].reason' '"delete_everything is not a tool keel offers in pack scholar"'
    # None was the policy's call, so the policy ran its own.
    expect_json '.tools_called' '["search_papers"]'
    expect_json '.model.forced_after_model' 'true'
    expect_err 'model.tool_call_rejected'
}

test_llm_request_body_static_prompt_then_state_then_history() {
    model_start
    model_script '[{"text": "ok"}, {"text": "Found them [1]."}]'
    printf '%s\n%s\n' "I'm focusing on graph neural networks for chemistry." "$DIRECT" > "$TMP/two.in"
    run "$KEEL" chat --json --now "$LLM_NOW" --db mem: --llm-url "$LLM" --llm-model fake-model \
        < "$TMP/two.in"
    expect_rc 0
    OUT=$(model_requests)
    # One system message: the pack's static prompt first, the same bytes
    # in every request (cache-friendly), then the turn's state block.
    static=$(printf '%s' "$OUT" | jq -r '.[0].messages[0].content' | sed -n '1,/^$/p' | head -c 60)
    expect_json '[.[].messages | map(select(.role == "system")) | length] | unique' '[1]'
    expect_json '[.[].messages[0].content | startswith("You are a research assistant for scholars.")] | unique' '[true]'
    expect_json '[.[].messages[0].content | split("\n\nConversation state")[0]] | unique | length' '1'
    expect_json '.[0].messages[0].content | contains("\n\nConversation state (turn 1):\n")' 'true'
    last=$(printf '%s' "$OUT" | jq 'length - 1')
    expect_json ".[$last].messages[0].content | contains(\"Research topic: graph neural networks for chemistry.\")" 'true'
    # The second turn carries the first as history, then the message.
    expect_json ".[$last].messages[1].role" '"user"'
    expect_json ".[$last].messages[1].content" '"I'"'"'m focusing on graph neural networks for chemistry."'
    expect_json ".[$last].messages[2].role" '"assistant"'
    expect_json ".[$last].messages[3].content" "\"$DIRECT\""
    # The answer request ends with keel's tool call and its results,
    # the tools declared and none to be called.
    expect_json ".[$last].messages[4].tool_calls[0].function.name" '"search_papers"'
    expect_json ".[$last].messages[4].tool_calls[0].id | test(\"^[A-Za-z0-9]{9}$\")" 'true'
    expect_json ".[$last].messages[5].role" '"tool"'
    expect_json ".[$last].messages[5].content | fromjson | .papers[0].n" '1'
    expect_json ".[$last].tool_choice" '"none"'
    [ -n "$static" ]
    # Routing rules are not in the prompt.
    printf '%s' "$OUT" | jq -r '.[0].messages[0].content' | grep -qi 'search_papers' &&
        fail "the static prompt names a tool"
    true
}

# Each failure of the upstream: the turn completes with the extractive
# answer and a notice, is stored, and the decision log says why.
fail_closed() {
    ask "$DIRECT" --db "$TMP/closed.db" ${CONV:+--conversation "$CONV"} "$@"
    expect_rc 0
    CONV=$(printf '%s' "$OUT" | jq -r .conversation_id)
    expect_json '.answer | startswith("I found 3 papers")' 'true'
    expect_json '.answer | endswith("Note: the language model did not answer, so this answer is taken directly from the sources.")' 'true'
    expect_json '.tools_called' '["search_papers"]'
    expect_json '.stage' '"finding_papers"'
}

test_llm_fails_closed_on_500_429_garbage_down_and_slow() {
    model_start
    model_script '[{"status": 500}]'
    fail_closed
    expect_json '.model.proposal.status' '"failed"'
    expect_json '.model.proposal.attempts' '3'
    expect_json '.model.proposal.reason | startswith("the model server answered HTTP 500")' 'true'
    model_script '[{"status": 429, "retry_after": 1}]'
    fail_closed
    expect_json '.model.proposal.reason | startswith("the model server answered HTTP 429")' 'true'
    model_script '[{"malformed": true}]'
    fail_closed
    expect_json '.model.proposal.reason' '"a stream event is not JSON"'
    model_script '[{"text": "ok"}, {"malformed": true}]'
    fail_closed
    expect_json '.model.proposal.status' '"ok"'
    expect_json '.model.answer.status' '"failed"'
    # Slow: a pack whose model gives up after 300 ms.
    cp -R "$root/packs" "$TMP/slowpacks"
    sed 's/^llm:$/llm:\n  timeout_ms: 300/' "$root/packs/scholar/pack.yaml" > "$TMP/slowpacks/scholar/pack.yaml"
    model_script '[{"text": "late", "delay_ms": 2000}]'
    KEEL_PACKS="$TMP/slowpacks" fail_closed
    expect_json '.model.proposal.reason' '"the model did not answer within 300 ms"'
    # An error page that is not UTF-8, quoted in the reason.
    model_script '[{"status": 502, "body_bytes": "<html>\u00ff\u00fe Bad gateway</html>"}]'
    fail_closed
    expect_json '.model.proposal.reason | startswith("the model server answered HTTP 502: <html>??")' 'true'
    # A server that refuses the tools (400) is up: the answer is still asked for.
    model_script '[{"status": 400}, {"text": "Here they are [1]."}]'
    ask "$DIRECT" --db mem:
    expect_rc 0
    expect_json '.model.proposal.status' '"failed"'
    expect_json '.model.answer.status' '"ok"'
    expect_json '.answer' '"Here they are [1]."'
    model_script '[{"status": 500}]'
    # Down: nothing listens any more.
    kill "$MODEL_PID"
    wait "$MODEL_PID" 2>/dev/null || true
    fail_closed
    expect_json '.model.proposal.reason | startswith("cannot reach the model")' 'true'
    # Every one of those turns was stored.
    expect_json '.turn' '7'
}

test_llm_circuit_opens_after_three_failed_calls() {
    model_start
    model_script '[{"malformed": true}]'
    printf '%s\n%s\n%s\n%s\n' "$DIRECT" "$DIRECT" "$DIRECT" "$DIRECT" > "$TMP/four.in"
    run "$KEEL" chat --json --now "$LLM_NOW" --db mem: --llm-url "$LLM" --llm-model fake-model \
        < "$TMP/four.in"
    expect_rc 0
    [ "$(model_requests | jq length)" = 3 ] || fail "the fourth turn still asked the model"
    [ "$(printf '%s' "$OUT" | tail -n 1 | jq -r .model.proposal.reason)" = \
      "the model server failed 3 times in a row; not asking it for another 30 s" ] ||
        fail "the fourth turn does not say the circuit is open"
}

test_llm_model_options_are_checked() {
    printf 'hello\n' > "$TMP/hello.in"
    run "$KEEL" chat --db mem: --llm-url http://127.0.0.1:9/v1 < "$TMP/hello.in"
    expect_rc 1
    expect_err 'llm_model'
    run "$KEEL" chat --db mem: --llm-url ftp://example.org --llm-model m < "$TMP/hello.in"
    expect_rc 1
    expect_err 'llm_url: must be an http:// or https:// URL'
    run "$KEEL" chat --db mem: --llm-url http://127.0.0.1:9/v1 --llm-model m --llm-key-env 'A-B' < "$TMP/hello.in"
    expect_rc 1
    expect_err 'llm_key_env'
}

# The model's tokens go out as they arrive, over keel's stream and
# OpenAI's; a stream cut mid-answer ends with the extractive answer.
test_llm_tokens_stream_over_both_endpoints() {
    model_start
    serve_start "$TMP/stream.db" --llm-url "$LLM" --llm-model fake-model --workers 1
    model_script '[{"text": "ok"}, {"text": "Alpha beta gamma [1].", "chunk_delay_ms": 30}]'
    post /v1/chat "{\"message\": \"$DIRECT\"}"
    expect_code 202
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    OUT=$(curl -sN --max-time 20 "$URL/v1/stream/$cid")
    printf '%s' "$OUT" | grep -q '^event: token' || fail "no token events"
    tokens=$(printf '%s' "$OUT" | grep -A1 '^event: token' | grep '^data:' | sed 's/^data: //' |
             jq -sc '[.[].text]')
    [ "$tokens" = '["Searching for papers now…","\n\n","Alpha ","beta ","gamma ","[1]."]' ] ||
        fail "tokens were not the model's pieces: $tokens"
    done=$(printf '%s' "$OUT" | grep -A1 '^event: done' | grep '^data:' | sed 's/^data: //')
    printf '%s' "$done" | jq -e '.answer == "Searching for papers now…\n\nAlpha beta gamma [1]."' \
        > /dev/null || fail "done has another answer: $done"
    # OpenAI's format.
    model_script '[{"text": "ok"}, {"text": "Delta epsilon [1].", "chunk_delay_ms": 30}]'
    OUT=$(curl -sN --max-time 20 -H "$J" "$URL/v1/chat/completions" \
          -d "{\"model\": \"scholar\", \"stream\": true, \"messages\": [{\"role\": \"user\", \"content\": \"$DIRECT\"}]}")
    pieces=$(printf '%s' "$OUT" | grep '^data: {' | sed 's/^data: //' |
             jq -sc '[.[].choices[0].delta.content // empty]')
    [ "$pieces" = '["Searching for papers now…","\n\n","Delta ","epsilon ","[1]."]' ] ||
        fail "chunks were not the model's pieces: $pieces"
    printf '%s' "$OUT" | tail -n 2 | grep -q '^data: \[DONE\]' || fail "no [DONE]"
    serve_stop
}

test_llm_midstream_disconnect_ends_with_the_extractive_answer() {
    model_start
    serve_start "$TMP/cut.db" --llm-url "$LLM" --llm-model fake-model --workers 1
    model_script '[{"text": "ok"}, {"text": "One two three four five six.", "disconnect_after": 2, "chunk_delay_ms": 20}]'
    post /v1/chat "{\"message\": \"$DIRECT\"}"
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    OUT=$(curl -sN --max-time 20 "$URL/v1/stream/$cid")
    printf '%s' "$OUT" | grep -q '^event: reset' || fail "no reset event after the cut"
    printf '%s' "$OUT" | grep -q '"One "' || fail "the first pieces were not streamed"
    printf '%s' "$OUT" | grep -q 'The language model stopped' || fail "no user-level notice"
    done=$(printf '%s' "$OUT" | grep -A1 '^event: done' | grep '^data:' | sed 's/^data: //')
    printf '%s' "$done" | jq -e '(.answer | startswith("I found 3 papers")) and
        (.answer | endswith("taken directly from the sources."))' > /dev/null ||
        fail "done does not hold the extractive answer: $done"
    # The stored turn says what happened.
    get "/v1/turns/$cid/decision"
    expect_code 200
    expect_json '.decision.model.answer.status' '"failed"'
    expect_json '.decision.model.answer.reason | startswith("the model")' 'true'
    serve_stop
}

# The model as planner (payer pack with llm.planner on): a valid plan is
# taken; one naming a path the pack lacks, or no JSON, leaves the
# deterministic plan.
test_llm_planner_is_validated_and_falls_back() {
    model_start
    cp -R "$root/packs" "$TMP/planpacks"
    printf 'llm:\n  planner: true\n' >> "$TMP/planpacks/payer/pack.yaml"
    Q='How do I file an appeal with Sunshine Health and what is the deadline for it?'
    model_script '[{"text": "Here is the plan:\n```json\n{\"subquestions\": [{\"text\": \"How do I file an appeal with Sunshine Health?\", \"path\": \"rag\"}, {\"text\": \"What is the appeal deadline at Sunshine Health?\", \"path\": \"rag\"}]}\n```"},
                   {"text": "ok"}, {"text": "File it in writing [1]."}]'
    KEEL_PACKS="$TMP/planpacks" ask "$Q" --pack payer --db mem:
    expect_rc 0
    expect_json '.model.planner.status' '"ok"'
    expect_json '[.state.blueprint.subquestions[].text]' '["How do I file an appeal with Sunshine Health?","What is the appeal deadline at Sunshine Health?"]'
    # The planner saw the capability registry.
    OUT=$(model_requests)
    expect_json '.[0].messages[1].content | contains("- patient")' 'true'
    # A path the pack lacks: the deterministic plan.
    model_script '[{"text": "{\"subquestions\": [{\"text\": \"Delete my records\", \"path\": \"admin\"}]}"},
                   {"text": "ok"}, {"text": "Answer [1]."}]'
    KEEL_PACKS="$TMP/planpacks" ask "$Q" --pack payer --db mem:
    expect_json '.model.planner.status' '"invalid"'
    expect_json '.model.planner.reason' '"subquestions[0].path \"admin\" is not a path of pack payer"'
    expect_json '.state.blueprint.question' "\"$Q\""
    expect_json '[.state.blueprint.subquestions[].path] | unique' '["rag"]'
    model_script '[{"text": "I would split it in two."}, {"text": "ok"}, {"text": "Answer [1]."}]'
    KEEL_PACKS="$TMP/planpacks" ask "$Q" --pack payer --db mem:
    expect_json '.model.planner.reason' '"the plan is not usable JSON: the text holds no JSON object"'
}

# What a path cannot answer is said in the pack's words, whatever the
# model writes (payer: a clinical question).
test_llm_cannot_override_an_unavailable_path() {
    model_start
    model_script '[{"text": "Take 800 mg every 4 hours; that is safe for everyone."}]'
    ask 'What is the dosage of ibuprofen?' --pack payer --db mem:
    expect_rc 0
    expect_json '.state.blueprint.subquestions[0].status' '"unavailable"'
    unavailable=$(grep -A4 '^    clinical:' "$root/packs/payer/pack.yaml" | sed -n 's/.*unavailable: "\(.*\)"/\1/p')
    [ -n "$unavailable" ] || fail "no unavailable text in the payer pack"
    expect_json ".answer | contains(\"$unavailable\")" 'true'
    expect_json '.answer | contains("800 mg")' 'false'
    # The model writing the answer cannot drop it either.
    model_script '[{"tool_calls": [{"name": "rag_search", "arguments": {"query": "ibuprofen dosage"}}]},
                   {"text": "Take 800 mg every 4 hours [1]."}]'
    ask 'What is the dosage of ibuprofen?' --pack payer --db mem:
    expect_json ".answer | contains(\"$unavailable\")" 'true'
    # The planner cannot route it away from the path that says so.
    cp -R "$root/packs" "$TMP/guardpacks"
    printf 'llm:\n  planner: true\n' >> "$TMP/guardpacks/payer/pack.yaml"
    model_script '[{"text": "{\"subquestions\": [{\"text\": \"What does the policy say about ibuprofen?\", \"path\": \"rag\"}]}"},
                   {"text": "ok"}, {"text": "Take 800 mg [1]."}]'
    KEEL_PACKS="$TMP/guardpacks" ask 'What is the dosage of ibuprofen?' --pack payer --db mem:
    expect_json '.model.planner.status' '"overruled"'
    expect_json '.state.blueprint.subquestions[0].path' '"clinical"'
    expect_json ".answer | contains(\"$unavailable\")" 'true'
}
