# Long-term memory (seed 003) through `keel memory`: the seed's four
# scenarios with the rules, then with a scripted model judge, including a
# judge whose answer is garbage.

SCHEMA='Create a completely new database schema for user authentication'
SQL='Generate optimized SQL queries for user data'
API='Build REST API for user management'

# mem ARGS…: keel memory with --json on the test's store ($MEMDB); $OUT
# is its JSON.
mem() {
    run "$KEEL" memory "$@" --json --db "$MEMDB"
}

scenarios() {
    mem add --task "$SCHEMA" --outcome success --summary 'CREATE TABLE users (id SERIAL PRIMARY KEY, email TEXT UNIQUE, password_hash TEXT)' "$@"
    expect_rc 0
    expect_json .decision '"ADD"'
    SCHEMA_ID=$(printf '%s' "$OUT" | jq -r .run_id)
    mem add --task "$SCHEMA" --outcome success --summary 'CREATE TABLE users (id SERIAL PRIMARY KEY, email TEXT UNIQUE, password_hash TEXT)' "$@"
    SECOND_SCHEMA=$OUT
    mem add --task "$SQL" --outcome failure --summary 'SELECT * FROM users' "$@"
    expect_json .decision '"ADD"'
    FAILED_ID=$(printf '%s' "$OUT" | jq -r .run_id)
    mem add --task "$SQL" --outcome success --summary 'SELECT id, name, email FROM users WHERE active = true' "$@"
    SQL_OUT=$OUT
    mem add --task "$API" --outcome success --summary 'A Flask app with routes for /users' --ref flask-docs "$@"
    FLASK_ID=$(printf '%s' "$OUT" | jq -r .run_id)
    mem add --task "$API" --outcome success --summary 'A FastAPI app with routers for /users' --ref fastapi-docs "$@"
    API_OUT=$OUT
    mem add --task 'Summarise the quarterly sales report for the board' --outcome success --summary 'Three bullet points' "$@"
    expect_json .decision '"ADD"'
}

test_memory_rules_add_not_replace_merge() {
    MEMDB="$TMP/rules.db"
    scenarios
    OUT=$SECOND_SCHEMA
    expect_json .decision '"NOT"'
    expect_json .target_run_id "\"$SCHEMA_ID\""
    expect_json .judge '"rules"'
    expect_json '.similarity == 1' 'true'
    OUT=$SQL_OUT
    expect_json .decision '"REPLACE"'
    expect_json .target_run_id "\"$FAILED_ID\""
    expect_json '.similarity > 0.7 and .similarity < 1' 'true'
    OUT=$API_OUT
    expect_json .decision '"MERGE"'
    expect_json .target_run_id "\"$FLASK_ID\""
    # The superseded run is never found; the merged pair both are, the
    # new one canonical with both references.
    mem search "$SQL"
    expect_json "[.[].id] | index(\"$FAILED_ID\")" 'null'
    expect_json '.[0].summary' '"SELECT id, name, email FROM users WHERE active = true"'
    mem search "$API" --limit 2
    expect_json '[.[] | select(.canonical) | .references]' '[["flask-docs","fastapi-docs"]]'
    expect_json '[.[] | select(.canonical) | .uses]' '[2]'
    # The NOT run was never stored; every decision was.
    mem decisions --limit 50
    expect_json 'length' '7'
    expect_json '[.[].decision]' '["ADD","MERGE","ADD","REPLACE","ADD","NOT","ADD"]'
    expect_json '.[5].reason | startswith("same task, same outcome and nothing new")' 'true'
}

test_memory_model_judge_and_its_garbage() {
    MEMDB="$TMP/judge.db"
    model_start
    # The judge is asked only when a run is similar: 4 of the 7 runs.
    model_script '[{"text": "```json\n{\"decision\": \"NOT\", \"target_run_id\": \"\", \"reason\": \"Redundant run, no new information\"}\n```"},
                   {"text": "{\"decision\": \"REPLACE\", \"reason\": \"New run succeeded where old one failed\"}"},
                   {"text": "Sure! {\"decision\": \"MERGE\", \"reason\": \"Complementary approaches, both valuable\"}"},
                   {"text": "I think this should be added."}]'
    scenarios --llm-url "$LLM" --llm-model fake-model
    OUT=$SECOND_SCHEMA
    expect_json '[.decision, .judge, .reason]' '["NOT","model","Redundant run, no new information"]'
    OUT=$SQL_OUT
    # REPLACE without a target takes the best match.
    expect_json '[.decision, .target_run_id]' "[\"REPLACE\",\"$FAILED_ID\"]"
    OUT=$API_OUT
    expect_json '[.decision, .target_run_id]' "[\"MERGE\",\"$FLASK_ID\"]"
    # The judge saw the run and its similar runs.
    OUT=$(model_requests)
    expect_json 'length' '3'
    expect_json '.[0].messages[1].content | fromjson | .run.task' "\"$SCHEMA\""
    expect_json '.[0].messages[1].content | fromjson | .similar_runs[0].id' "\"$SCHEMA_ID\""
    # Garbage, a decision that is none, a target that is no candidate,
    # a judge that is down: ADD, with the reason.
    model_script '[{"text": "I think this should be added."}]'
    mem add --task "$SCHEMA" --outcome success --summary 'again' --llm-url "$LLM" --llm-model fake-model
    expect_json '[.decision, .judge]' '["ADD","model"]'
    expect_json '.reason' '"ADD, as the model judge'"'"'s answer is not JSON: the text holds no JSON object"'
    model_script '[{"text": "{\"decision\": \"DELETE\"}"}]'
    mem add --task "$SCHEMA" --outcome success --summary 'again 2' --llm-url "$LLM" --llm-model fake-model
    expect_json '.reason' '"ADD, as the model judge'"'"'s decision is not ADD, NOT, REPLACE or MERGE"'
    model_script '[{"text": "{\"decision\": \"REPLACE\", \"target_run_id\": \"run_nope\"}"}]'
    mem add --task "$SCHEMA" --outcome success --summary 'again 3' --llm-url "$LLM" --llm-model fake-model
    expect_json '.reason' '"ADD, as the model judge named a run that is not a candidate"'
    kill "$MODEL_PID"
    wait "$MODEL_PID" 2>/dev/null || true
    mem add --task "$SCHEMA" --outcome success --summary 'again 4' --llm-url "$LLM" --llm-model fake-model
    expect_rc 0
    expect_json '.reason | startswith("ADD, as the model judge failed: cannot reach the model")' 'true'
}

test_memory_bad_input_names_the_field() {
    MEMDB="$TMP/bad.db"
    mem add --task '' --outcome success
    expect_rc 2
    expect_json .error.field '"task"'
    mem add --task 'x' --outcome maybe
    expect_rc 2
    expect_json .error.field '"outcome"'
    mem add --task 'x' --outcome success --id 'has space'
    expect_rc 2
    expect_json .error.field '"id"'
    mem decisions
    expect_json 'length' '0'
    run "$KEEL" memory forget
    expect_rc 2
    expect_err 'unknown command "forget"'
}

test_memory_over_http() {
    db="$TMP/memhttp.db"
    run "$KEEL" keys create --user alice --role editor --db "$db"
    editor=$OUT
    run "$KEEL" keys create --user alice --role viewer --db "$db"
    viewer=$OUT
    SERVE_AUTH=keys serve_start "$db" --workers 1
    auth_post "$editor" /v1/memory/runs "{\"task\": \"$SQL\", \"outcome\": \"failure\", \"summary\": \"SELECT * FROM users\"}"
    expect_code 201
    expect_json .decision '"ADD"'
    failed=$(printf '%s' "$OUT" | jq -r .run_id)
    auth_post "$editor" /v1/memory/runs "{\"task\": \"$SQL\", \"outcome\": \"success\", \"summary\": \"SELECT id, name, email FROM users WHERE active = true\", \"references\": [\"pg-docs\"]}"
    expect_code 201
    expect_json '[.decision, .target_run_id]' "[\"REPLACE\",\"$failed\"]"
    expect_json '.similarity' '0.9243'
    auth_post "$editor" /v1/memory/runs "{\"task\": \"$SQL\", \"outcome\": \"success\", \"summary\": \"SELECT id, name, email FROM users WHERE active = true\", \"references\": [\"pg-docs\"]}"
    expect_code 200
    expect_json .decision '"NOT"'
    auth_get "$viewer" "/v1/memory/search?q=optimized%20SQL&limit=5"
    expect_code 200
    expect_json '[.runs[].id] | index("'"$failed"'")' 'null'
    expect_json '.runs[0].references' '["pg-docs"]'
    auth_get "$viewer" "/v1/memory/decisions?limit=2"
    expect_code 200
    expect_json '[.decisions[].decision]' '["NOT","REPLACE"]'
    # A viewer reads but never writes; bad input names the field.
    auth_post "$viewer" /v1/memory/runs '{"task": "x", "outcome": "success"}'
    expect_code 403
    auth_post "$editor" /v1/memory/runs '{"task": "x", "outcome": "perhaps"}'
    expect_code 400
    expect_json .error.field '"outcome"'
    auth_post "$editor" /v1/memory/runs '{"task": "x", "outcome": "success", "references": "pg"}'
    expect_code 400
    expect_json .error.field '"references"'
    auth_get "$viewer" "/v1/memory/search"
    expect_code 400
    expect_json .error.field '"q"'
    auth_get "$viewer" "/v1/memory/decisions?limit=0"
    expect_code 400
    get /v1/memory/decisions
    expect_code 401
    serve_stop
    # The CLI sees what the server decided, for alice (--user); the local
    # user (the CLI's default) has no runs of hers.
    run "$KEEL" memory decisions --db "$db" --json --user alice
    expect_json 'length' '3'
    run "$KEEL" memory decisions --db "$db" --json
    expect_json 'length' '0'
}

# Memory belongs to users (issue 7): Alice's run, made from her turn,
# is never shown to Bob (search, decisions) nor decides about his runs;
# deleting her conversation erases its runs from search and the tasks
# from the audit trail.
test_memory_two_users_no_leak() {
    db="$TMP/memusers.db"
    run "$KEEL" keys create --user alice --role editor --db "$db"
    alice=$OUT
    run "$KEEL" keys create --user bob --role editor --db "$db"
    bob=$OUT
    SERVE_AUTH=keys serve_start "$db" --workers 1
    auth_post "$alice" '/v1/chat?wait=1' '{"message": "find recent papers on alice secret sleep project"}'
    expect_code 200
    conv=$(printf '%s' "$OUT" | jq -r .conversation_id)
    cid=$(printf '%s' "$OUT" | jq -r .correlation_id)
    run_id="run_${cid#turn_}"
    auth_get "$alice" "/v1/memory/search?q=alice%20secret"
    expect_json '[.runs[].id]' "[\"$run_id\"]"
    expect_json '.runs[0].conversation_id' "\"$conv\""
    # Bob sees nothing of hers
    auth_get "$bob" "/v1/memory/search?q=alice%20secret"
    expect_code 200
    expect_json '.runs' '[]'
    auth_get "$bob" /v1/memory/decisions
    expect_json '.decisions' '[]'
    printf '%s' "$OUT" | grep -q "secret\|$conv" && fail "bob saw alice's memory: $OUT"
    # Bob's run on the same task: compared with his runs only
    auth_post "$bob" /v1/memory/runs '{"task": "find recent papers on alice secret sleep project", "outcome": "failure", "summary": "nothing found"}'
    expect_code 201
    expect_json '[.decision, .candidates]' '["ADD",[]]'
    bob_run=$(printf '%s' "$OUT" | jq -r .run_id)
    auth_post "$bob" /v1/memory/runs '{"task": "find recent papers on alice secret sleep project", "outcome": "success", "summary": "three papers"}'
    expect_json '[.decision, .target_run_id]' "[\"REPLACE\",\"$bob_run\"]"
    # nor may he name her conversation
    auth_post "$bob" /v1/memory/runs "{\"task\": \"x\", \"outcome\": \"success\", \"conversation_id\": \"$conv\"}"
    expect_code 404
    auth_get "$bob" /v1/memory/decisions
    expect_json '[.decisions[].decision]' '["REPLACE","ADD"]'
    auth_get "$alice" /v1/memory/decisions
    expect_json '[.decisions[].run_id]' "[\"$run_id\"]"
    # Deleting her conversation erases its runs: gone from search, the
    # decisions keep their ids but no task, and an ERASE is recorded
    code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $alice" \
        "$URL/v1/conversations/$conv")
    [ "$code" = 204 ] || fail "delete: $code"
    auth_get "$alice" "/v1/memory/search?q=alice%20secret%20sleep%20project"
    expect_json "[.runs[].id] | index(\"$run_id\")" 'null'
    auth_get "$alice" /v1/memory/decisions
    expect_json '[.decisions[] | [.decision, .run_id, .task]]' "[[\"ERASE\",\"$run_id\",\"\"],[\"ADD\",\"$run_id\",\"\"]]"
    printf '%s' "$OUT" | grep -q secret && fail "the task stayed: $OUT"
    auth_get "$bob" "/v1/memory/search?q=alice%20secret"
    expect_json '.runs | length' '1'
    serve_stop
    [ "$(sqlite3 "$db" "SELECT task || '|' || summary || '|' || (erased_at IS NOT NULL) FROM memory_runs WHERE id = '$run_id'")" = '||1' ] ||
        fail "the erased run kept its texts"
    [ "$(sqlite3 "$db" "SELECT count(*) FROM memory_decisions WHERE task LIKE '%alice secret%' AND owner = 'alice'")" = 0 ] ||
        fail "a decision kept alice's task"
}

# A turn that ran a search is a run: the remember stage decides with the
# turn and publish stores both in one transaction.
test_memory_remember_stage_with_turns() {
    db="$TMP/remember.db"
    printf '%s\n%s\n%s\n' 'find recent papers on graph neural networks' \
        'find recent papers on graph neural networks' 'hello there' > "$TMP/rem.in"
    run "$KEEL" chat --json --db "$db" --now 2026-11-24T12:00:00Z < "$TMP/rem.in"
    expect_rc 0
    first=$(printf '%s' "$OUT" | sed -n 1p)
    second=$(printf '%s' "$OUT" | sed -n 2p)
    third=$(printf '%s' "$OUT" | sed -n 3p)
    OUT=$first
    expect_json '.memory.decision' '"ADD"'
    run_id=$(printf '%s' "$OUT" | jq -r .memory.run_id)
    cid=$(sqlite3 "$db" 'SELECT correlation_id FROM turns WHERE seq = 1')
    [ "$run_id" = "run_${cid#turn_}" ] || fail "the run is not named after its turn: $run_id"
    OUT=$second
    expect_json '[.memory.decision, .memory.target_run_id]' "[\"NOT\",\"$run_id\"]"
    OUT=$third
    expect_json '.memory' 'null'
    # The run as stored, and the decision in the turn's decision log.
    run "$KEEL" memory search 'graph neural networks' --json --db "$db"
    expect_json '.[0].id' "\"$run_id\""
    expect_json '.[0].outcome' '"success"'
    expect_json '.[0].summary | startswith("search_papers \"graph neural networks\" from 2022")' 'true'
    expect_json '.[0].references | length > 0' 'true'
    [ "$(sqlite3 "$db" "SELECT json_extract(decision, '$.memory.decision') FROM decisions WHERE turn_seq = 2")" = NOT ] ||
        fail "the decision log lacks the memory decision"
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM memory_decisions')" = 2 ] || fail "decisions: not 2"
    # A pack without memory remembers nothing.
    printf 'convert 5 km to miles\n' > "$TMP/rem2.in"
    run "$KEEL" chat --json --db "$db" --pack assistant < "$TMP/rem2.in"
    [ "$(sqlite3 "$db" 'SELECT count(*) FROM memory_decisions')" = 2 ] || fail "assistant remembered"
}

# An OpenAI-compatible /v1/embeddings embedder: its vectors are stored
# with its name and dimension, and runs of another embedder are never
# compared with them.
test_memory_embeddings_embedder() {
    MEMDB="$TMP/embed.db"
    model_start
    mem add --task "$SQL" --outcome failure --summary 'SELECT * FROM users'
    expect_json .decision '"ADD"'
    hashed=$(printf '%s' "$OUT" | jq -r .run_id)
    mem add --task "$SQL" --outcome failure --summary 'SELECT * FROM users' --embed-url "$LLM" --embed-model fake-embed
    expect_rc 0
    # the hashed run is not compared: the model's first run is an ADD
    expect_json '[.decision, .candidates]' '["ADD",[]]'
    first=$(printf '%s' "$OUT" | jq -r .run_id)
    mem add --task "$SQL" --outcome success --summary 'SELECT id FROM users' --embed-url "$LLM" --embed-model fake-embed
    expect_json '[.decision, .target_run_id]' "[\"REPLACE\",\"$first\"]"
    OUT=$(model_requests)
    expect_json '.[0].model' '"fake-embed"'
    expect_json '.[0].input | startswith("Generate optimized SQL queries for user data")' 'true'
    [ "$(sqlite3 "$MEMDB" "SELECT embedder || ':' || dim FROM memory_runs WHERE id = '$first'")" = 'openai:fake-embed:16' ] ||
        fail "the run does not name its embedder"
    [ "$(sqlite3 "$MEMDB" "SELECT embedder || ':' || dim FROM memory_runs WHERE id = '$hashed'")" = 'hashed-v1:256' ] ||
        fail "the hashed run lost its embedder"
    # The embedder down: a clear error, nothing stored.
    kill "$MODEL_PID"
    wait "$MODEL_PID" 2>/dev/null || true
    mem add --task 'x' --outcome success --embed-url "$LLM" --embed-model fake-embed
    expect_rc 1
    expect_json '.error.message | startswith("cannot reach the model")' 'true'
    mem decisions --limit 10
    expect_json 'length' '3'
}
