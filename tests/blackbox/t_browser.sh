# keel's web page in a real browser: Debian's chromium, headless, driven
# by playwright-core (tests/browser/page_test.mjs, pinned in
# tests/browser/package-lock.json and installed once with npm ci beside
# the keel binary). Sends a message, sees the stage lines stream in and
# the answer with its sources, then a second message in the same
# conversation. Skipped when node, npm or chromium is absent.

test_browser_page_chats_and_streams() {
    chromium=${CHROMIUM:-/usr/bin/chromium}
    if ! command -v node > /dev/null 2>&1 || ! command -v npm > /dev/null 2>&1 ||
        [ ! -x "$chromium" ]; then
        echo "skipped: node, npm and chromium are needed (scripts/install-deps installs chromium)"
        return 0
    fi
    cache="$(cd "$(dirname "$KEEL")" && pwd)/npm-browser"
    if [ ! -f "$cache/node_modules/playwright-core/package.json" ]; then
        mkdir -p "$cache"
        cp "$root/tests/browser/package.json" "$root/tests/browser/package-lock.json" "$cache/"
        (cd "$cache" && npm ci --no-audit --no-fund --loglevel=error) > "$TMP/npm.log" 2>&1 ||
            fail "npm ci of playwright-core failed: $(tail -n 5 "$TMP/npm.log")"
    fi
    cp "$root/tests/browser/page_test.mjs" "$cache/"
    serve_start "$TMP/browser.db"
    CHROMIUM=$chromium run node "$cache/page_test.mjs" "$URL/"
    serve_stop
    expect_rc 0
    expect_json '.errors' '[]'
    expect_json '.stages | index("Searching for papers…") != null' 'true'
    expect_json '.answer | startswith("I found")' 'true'
    expect_json '(.sources | length) > 0' 'true'
    expect_json '.conversation | startswith("conv_")' 'true'
    expect_json '.turns' '2'
    expect_json '.same_conversation' 'true'
}
