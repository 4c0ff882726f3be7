// Drives respond's playground in Debian's Chromium (Playwright), one scenario per run:
//   node playground.mjs SCENARIO BASE_URL OUT_DIR API_KEY
// Screenshots go to OUT_DIR; the last stdout line is a JSON report for the pytest side.
// A failed expectation exits non-zero with the reason on stderr.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [scenario, baseUrl, outDir, apiKey] = process.argv.slice(2);
const TIMEOUT = Number(process.env.PLAYGROUND_TIMEOUT_MS || 240_000); // a shared machine may be slow

const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

function expect(condition, message) {
  if (!condition) throw new Error(`expectation failed: ${message}`);
}

async function openPage(context, key) {
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  await page.goto(baseUrl + "/");
  await page.waitForSelector("body[data-ready=true]");
  await page.fill("#api-key", key);
  await page.dispatchEvent("#api-key", "change");
  await page.fill("#temperature", "0");
  await page.fill("#max-output-tokens", "24");
  await page.dispatchEvent("#max-output-tokens", "change");
  return page;
}

async function say(page, text) {
  const before = await page.locator(".turn.assistant").count();
  await page.fill("#message", text);
  await page.click("#send");
  return finished(page, before);
}

// Waits for assistant turn number `index` to end; returns what it shows.
async function finished(page, index) {
  const turn = page.locator(".turn.assistant").nth(index);
  await page.waitForFunction(
    (i) => {
      const node = document.querySelectorAll(".turn.assistant")[i];
      return node && ["completed", "incomplete", "failed"].includes(node.dataset.status);
    },
    index,
  );
  const message = turn.locator(".item.message").first();
  const hasMessage = (await message.count()) > 0;
  return {
    status: await turn.getAttribute("data-status"),
    responseId: await turn.getAttribute("data-response-id"),
    text: hasMessage ? await message.locator(".text").textContent() : null,
    deltas: hasMessage ? Number(await message.getAttribute("data-deltas")) : 0,
    meta: await turn.locator(".meta").textContent(),
  };
}

const scenarios = {
  async stream(page) {
    const turn = await say(page, "Write one short sentence about the sea.");
    await page.screenshot({ path: join(outDir, "stream.png") });
    expect(turn.text && turn.text.trim().length > 0, "the streamed answer has text");
    expect(turn.deltas > 1, `the text arrived in several deltas (got ${turn.deltas})`);
    expect(/out/.test(turn.meta) && /first token/.test(turn.meta), "usage and timing are shown");
    return turn;
  },

  async tool(page) {
    const tools = [{
      type: "function",
      name: "get_weather",
      description: "Current weather for a city.",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    }];
    await page.fill("#tools", JSON.stringify(tools, null, 2));
    await page.dispatchEvent("#tools", "change");
    await page.selectOption("#tool-choice", "function:get_weather");
    await page.fill("#max-output-tokens", "32"); // room for the whole call
    const first = await say(page, "What is the weather in Paris?");
    const call = page.locator(".turn.assistant .item.function_call").first();
    await call.waitFor();
    await page.screenshot({ path: join(outDir, "tool-call.png") });
    const name = await call.getAttribute("data-name");
    const callId = await call.getAttribute("data-call-id");
    const args = await call.locator(".args").textContent();
    expect(name === "get_weather", `the call item names the tool (got ${name})`);
    JSON.parse(args); // the arguments shown are JSON
    // Answer the call by hand; tool choice back to auto so the model may answer in text.
    await page.selectOption("#tool-choice", "none");
    await call.locator("textarea").fill('{"temperature_c": 21, "sky": "clear"}');
    await call.locator("button[type=submit]").click();
    const second = await finished(page, 1);
    await page.waitForSelector(".turn.user .item.function_call_output");
    await page.screenshot({ path: join(outDir, "tool-result.png") });
    return { first, second, name, callId, args };
  },

  async chain(page) {
    const bodies = [];
    page.on("request", (request) => {
      if (request.url().endsWith("/v1/responses") && request.method() === "POST") {
        bodies.push(JSON.parse(request.postData()));
      }
    });
    const first = await say(page, "My name is Ada. Remember it.");
    const second = await say(page, "What is my name?");
    await page.screenshot({ path: join(outDir, "chain.png") });
    expect(bodies.length === 2, "two turns were sent");
    expect(!bodies[0].previous_response_id, "the first turn starts fresh");
    expect(bodies[1].previous_response_id === first.responseId, "the second turn chains to the first");
    const history = await page.locator("#history li[data-kind=response]").count();
    expect(history >= 2, `both stored responses are listed (got ${history})`);
    await page.locator("#history li[data-kind=response] button", { hasText: "input items" }).first().click();
    await page.waitForFunction(() => document.querySelector("#inspector-body").textContent.includes("What is my name?"));
    await page.screenshot({ path: join(outDir, "history.png") });
    return { first, second, sent: bodies };
  },

  async badkey(page) {
    await page.fill("#message", "Hello?");
    await page.click("#send");
    const error = page.locator(".turn.error .error-message").first();
    await error.waitFor();
    await page.screenshot({ path: join(outDir, "bad-key.png") });
    return { message: await error.textContent(), meta: await page.locator(".turn.error .meta").first().textContent() };
  },
};

async function main() {
  const profile = mkdtempSync(join(tmpdir(), "respond-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: FLAGS,
    viewport: { width: 1360, height: 860 },
  });
  const origins = new Set();
  const problems = [];
  let page = null;
  context.on("request", (request) => origins.add(new URL(request.url()).origin));
  try {
    const key = scenario === "badkey" ? "wrong-key" : apiKey;
    page = await openPage(context, key);
    page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
    page.on("console", (message) => {
      if (message.type() === "error" && !/status of 401/.test(message.text())) problems.push(`console: ${message.text()}`);
    });
    const report = await scenarios[scenario](page);
    expect(problems.length === 0, problems.join("; "));
    console.log(JSON.stringify({ scenario, origins: [...origins], ...report }));
  } catch (error) {
    // Leave what the page showed for whoever reads the failure.
    if (page) await page.screenshot({ path: join(outDir, `${scenario}-failure.png`) }).catch(() => {});
    if (problems.length) console.error(problems.join("\n"));
    throw error;
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error.stack || String(error));
  process.exit(1);
});
