// The active scenario on keel's web page (seed 004), in Debian's chromium
// driven by playwright-core: a household message shows the scenario's
// one-line summary as a pill above the input; a follow-up changes it;
// clicking the pill shows the whole scenario as JSON with a reset button,
// and reset clears it on the server (DELETE …/scenario) and hides the pill.
// Usage: node scenario_test.mjs URL [API_KEY]
// Prints one JSON line with what the page showed; exits 1 on any error.
import { chromium } from 'playwright-core';

const [url, apiKey] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--headless=new'],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  if (apiKey) {
    await page.waitForSelector('#key', { state: 'visible' });
    await page.fill('#key', apiKey);
    await page.dispatchEvent('#key', 'change');
  }
  await page.waitForSelector('#pack option[value="household"]', { state: 'attached' });
  await page.selectOption('#pack', 'household');
  const result = { errors };
  result.pill_before = await page.evaluate(() => !document.getElementById('pill').hidden);
  await page.fill('#msg', 'Single earner £45k Scotland — marginal rate at £60k?');
  await page.click('#send');
  await page.waitForSelector('.turn[data-done="1"]', { timeout: 20000 });
  await page.waitForSelector('#pill', { state: 'visible', timeout: 5000 });
  result.pill_1 = await page.evaluate(() => document.getElementById('pill').textContent);
  result.answer_1 = await page.evaluate(() => document.querySelector('.turn .answer').textContent);
  // the follow-up changes one field
  await page.fill('#msg', 'What if they were married?');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.turn[data-done="1"]').length === 2,
                             null, { timeout: 20000 });
  result.pill_2 = await page.evaluate(() => document.getElementById('pill').textContent);
  // the pill opens the whole scenario
  await page.click('#pill');
  await page.waitForSelector('#scenario[open]', { timeout: 5000 });
  result.json = JSON.parse(await page.evaluate(
    () => document.getElementById('scenariojson').textContent));
  // reset: the server forgets it, the pill goes
  await page.click('#reset');
  await page.waitForSelector('#pill', { state: 'hidden', timeout: 5000 });
  result.dialog_open_after_reset = await page.evaluate(
    () => document.getElementById('scenario').open);
  const conversation = await page.evaluate(() => document.getElementById('conv').textContent);
  result.server_after_reset = await page.evaluate(async ([id, key]) => {
    const r = await fetch('/v1/conversations/' + id,
                          { headers: key ? { Authorization: 'Bearer ' + key } : {} });
    return (await r.json()).active_scenario;
  }, [conversation, apiKey || '']);
  // a new conversation starts without one
  await page.click('#new');
  result.pill_new = await page.evaluate(() => !document.getElementById('pill').hidden);
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
