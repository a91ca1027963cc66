# The official `openai` npm package as a real client of keel serve's
# OpenAI-compatible API (tests/npm/openai_client.mjs): models, a
# completion, then a streamed completion in the same conversation, with
# an API key. The package is installed once (npm ci from the registry,
# pinned by tests/npm/package-lock.json) beside the keel binary. Skipped
# when node or npm is absent.

test_openai_package_drives_keel() {
    if ! command -v node > /dev/null 2>&1 || ! command -v npm > /dev/null 2>&1; then
        echo "skipped: node and npm are needed for the openai package"
        return 0
    fi
    RC=0 OUT= ERR=
    cache=$(npm_package npm openai) || fail "cannot install the openai package"
    db="$TMP/openai.db"
    run "$KEEL" keys create --user npm --role editor --db "$db"
    expect_rc 0
    token=$OUT
    SERVE_AUTH=keys serve_start "$db"
    run node "$cache/openai_client.mjs" "$URL/v1" "$token"
    serve_stop
    expect_rc 0
    expect_json '.models' '["scholar","payer","household","assistant"]'
    expect_json '.first.object' '"chat.completion"'
    expect_json '.first.finish' '"stop"'
    expect_json '.first.content | startswith("Which health plan")' 'true'
    expect_json '.first.conversation | startswith("npm-")' 'true'
    expect_json '.streamed.finish' '"stop"'
    expect_json '.streamed.chunks > 3' 'true'
    expect_json '.streamed.text | contains("Sunshine Health")' 'true'
    # a wrong key is refused as OpenAI clients expect (401)
    SERVE_AUTH=keys serve_start "$db"
    run node "$cache/openai_client.mjs" "$URL/v1" keel_not_a_key
    serve_stop
    expect_rc 1
    expect_err "401"
}
