# keel's web page in a real browser: Debian's chromium, headless, driven
# by playwright-core (tests/browser/page_test.mjs, pinned in
# tests/browser/package-lock.json and installed once with npm ci beside
# the keel binary). Sends a message, sees the stage lines stream in and
# the answer with its sources, then a second message in the same
# conversation, a third that builds a research brief, whose markdown
# the page fetches; the active scenario's pill and its reset
# (tests/browser/scenario_test.mjs). Skipped when node, npm or chromium is
# absent.

# Nonzero (with a message) when node, npm or chromium is missing; sets
# $chromium.
browser_ready() {
    chromium=${CHROMIUM:-/usr/bin/chromium}
    if ! command -v node > /dev/null 2>&1 || ! command -v npm > /dev/null 2>&1 ||
        [ ! -x "$chromium" ]; then
        echo "skipped: node, npm and chromium are needed (scripts/install-deps installs chromium)"
        return 1
    fi
}

test_browser_page_chats_and_streams() {
    browser_ready || return 0
    RC=0 OUT= ERR=
    cache=$(npm_package browser playwright-core) || fail "cannot install playwright-core"
    serve_start "$TMP/browser.db"
    CHROMIUM=$chromium run node "$cache/page_test.mjs" "$URL/"
    serve_stop
    expect_rc 0
    expect_json '.errors' '[]'
    expect_json '.stages | index("Searching for papers…") != null' 'true'
    expect_json '.answer | startswith("I found")' 'true'
    expect_json '(.sources | length) > 0' 'true'
    expect_json '.conversation | startswith("conv_")' 'true'
    expect_json '.turns' '3'
    expect_json '.same_conversation' 'true'
    expect_json '.artifact_summary | startswith("research brief: ")' 'true'
    expect_json '.artifact_markdown | startswith("# Research brief: ")' 'true'
}

test_browser_page_with_an_api_key() {
    browser_ready || return 0
    RC=0 OUT= ERR=
    cache=$(npm_package browser playwright-core) || fail "cannot install playwright-core"
    db="$TMP/browser-keys.db"
    run "$KEEL" keys create --user web --role editor --db "$db"
    token=$OUT
    SERVE_AUTH=keys serve_start "$db"
    CHROMIUM=$chromium run node "$cache/page_test.mjs" "$URL/" "$token"
    serve_stop
    expect_rc 0
    expect_json '.errors' '[]'
    expect_json '.answer | startswith("I found")' 'true'
    expect_json '.same_conversation' 'true'
    expect_json '.artifact_markdown | startswith("# Research brief: ")' 'true'
}

# The scenario pill (seed 004): its summary after each turn, the JSON
# behind it, and reset, with and without keys.
scenario_page() {
    expect_rc 0
    expect_json '.errors' '[]'
    expect_json '.pill_before' 'false'
    expect_json '.pill_1' '"Single earner, £45k, Scotland"'
    expect_json '.answer_1 | contains("marginal rate 42%")' 'true'
    expect_json '.pill_2' '"Married, single earner, £45k, Scotland"'
    expect_json '.json.household.marital_status' '"married"'
    expect_json '.json.household.earners' '[{"employment_income":45000}]'
    expect_json '.dialog_open_after_reset' 'false'
    expect_json '.server_after_reset' 'null'
    expect_json '.pill_new' 'false'
}

test_browser_scenario_pill_and_reset() {
    browser_ready || return 0
    RC=0 OUT= ERR=
    cache=$(npm_package browser playwright-core) || fail "cannot install playwright-core"
    serve_start "$TMP/browser-scenario.db" --packs household,scholar
    CHROMIUM=$chromium run node "$cache/scenario_test.mjs" "$URL/"
    serve_stop
    scenario_page
}

test_browser_scenario_pill_with_an_api_key() {
    browser_ready || return 0
    RC=0 OUT= ERR=
    cache=$(npm_package browser playwright-core) || fail "cannot install playwright-core"
    db="$TMP/browser-scenario-keys.db"
    run "$KEEL" keys create --user web --role editor --db "$db"
    token=$OUT
    SERVE_AUTH=keys serve_start "$db" --packs household,scholar
    CHROMIUM=$chromium run node "$cache/scenario_test.mjs" "$URL/" "$token"
    serve_stop
    scenario_page
}
