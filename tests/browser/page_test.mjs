// Opens keel's web page in Debian's chromium (headless, driven by
// playwright-core), sends a message and waits for the streamed stage lines
// and the answer with its sources, then asks for a research brief and
// opens its artifact (seed 001). With an API key argument, the server
// wants keys: the page must ask for one first.
// Usage: node page_test.mjs URL [API_KEY]
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
    await page.press('#key', 'Enter');
    await page.dispatchEvent('#key', 'change');
  }
  await page.waitForSelector('#pack option[value="scholar"]', { state: 'attached' });
  await page.selectOption('#pack', 'scholar');
  await page.fill('#msg', 'find recent papers on sleep and memory');
  await page.click('#send');
  await page.waitForSelector('.turn[data-done="1"]', { timeout: 20000 });
  const result = await page.evaluate(() => ({
    stages: [...document.querySelectorAll('.turn .stages div')].map((d) => d.textContent),
    answer: document.querySelector('.turn .answer').textContent,
    sources: [...document.querySelectorAll('.turn .sources div')].map((d) => d.textContent),
    conversation: document.getElementById('conv').textContent,
  }));
  // a second message continues the same conversation
  await page.fill('#msg', 'my research question is whether naps help memory');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.turn[data-done="1"]').length === 2,
                             null, { timeout: 20000 });
  // a cited synthesis builds a research brief: the page shows it and fetches its markdown
  await page.fill('#msg', 'find recent papers on sleep and memory and summarize the evidence with citations');
  await page.click('#send');
  await page.waitForFunction(() => document.querySelectorAll('.turn[data-done="1"]').length === 3,
                             null, { timeout: 20000 });
  result.artifact_summary = await page.evaluate(
    () => (document.querySelector('.turn:nth-child(3) details.artifact summary') || {}).textContent);
  await page.click('.turn:nth-child(3) details.artifact summary');
  await page.waitForSelector('.turn:nth-child(3) details.artifact[data-loaded="1"]', { timeout: 20000 });
  result.artifact_markdown = await page.evaluate(
    () => document.querySelector('.turn:nth-child(3) details.artifact pre').textContent);
  result.turns = await page.evaluate(() => document.querySelectorAll('.turn').length);
  result.same_conversation = (await page.evaluate(
    () => document.getElementById('conv').textContent)) === result.conversation;
  result.errors = errors;
  console.log(JSON.stringify(result));
} finally {
  await browser.close();
}
