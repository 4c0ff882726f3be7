// Vercel AI SDK cases against a running respond server, one case per process.
//
//   node ai_sdk.mjs <provider> <case> <base_url> <model>
//
// provider: "openai" (@ai-sdk/openai, createOpenAI({baseURL}).responses(model)) or
// "open-responses" (@ai-sdk/open-responses, createOpenResponses({url})).
// case: generateText | streamText | toolCall | generateObject | outputObject | intObject.
// Prints one JSON line describing what came back; exits non-zero when the case fails.
// tests/clients/test_ai_sdk.py runs it against the real server.

import { createOpenResponses } from "@ai-sdk/open-responses";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, Output, streamText, tool } from "ai";
import { z } from "zod";

const [provider, name, baseURL, modelId] = process.argv.slice(2);
const PROMPT = "Reply with one word: yes or no?";

function model() {
  if (provider === "openai") {
    return createOpenAI({ baseURL, apiKey: "unused" }).responses(modelId);
  }
  if (provider === "open-responses") {
    return createOpenResponses({ name: "respond", url: `${baseURL}/responses` })(modelId);
  }
  throw new Error(`unknown provider ${provider}`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

const CITY = z.object({ name: z.string(), population: z.number() });

const weather = tool({
  description: "The weather in a city",
  // strict: the server constrains the arguments to the schema (the AI SDK's default, false,
  // leaves a small model free to write any JSON, or none).
  strict: true,
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny in ${city}.`,
});

const cases = {
  async generateText() {
    const result = await generateText({
      model: model(),
      prompt: PROMPT,
      maxOutputTokens: 16,
      temperature: 0,
    });
    check(result.text.trim().length > 0, "empty text");
    check(result.finishReason === "stop", `finishReason ${result.finishReason}`);
    check(result.usage.outputTokens > 0, "no usage");
    return {
      text: result.text,
      finishReason: result.finishReason,
      id: result.response.id,
      warnings: result.warnings,
    };
  },

  async streamText() {
    const result = streamText({ model: model(), prompt: PROMPT, maxOutputTokens: 16, temperature: 0 });
    const parts = [];
    for await (const part of result.fullStream) {
      if (part.type === "error") throw part.error;
      parts.push(part.type);
    }
    const text = await result.text;
    check(parts.includes("text-delta"), `no text-delta in ${parts}`);
    check(text.trim().length > 0, "empty text");
    check((await result.finishReason) === "stop", `finishReason ${await result.finishReason}`);
    return { text, parts: [...new Set(parts)], warnings: await result.warnings };
  },

  async toolCall() {
    const result = await generateText({
      model: model(),
      prompt: "What is the weather in Paris?",
      tools: { weather },
      toolChoice: { type: "tool", toolName: "weather" },
      // One call (the open-responses provider has no such option; the tiny model may then
      // repeat the call until the token limit, which the AI SDK reports as finishReason "length").
      providerOptions: { openai: { parallelToolCalls: false } },
      maxOutputTokens: 48,
      temperature: 0,
    });
    const valid = result.toolCalls.filter((call) => !call.invalid);
    check(valid.length > 0, `no valid tool call in ${JSON.stringify(result.toolCalls)}`);
    check(valid[0].toolName === "weather", `called ${valid[0].toolName}`);
    check(typeof valid[0].input.city === "string", "city is not a string");
    // Without parallelToolCalls: false (open-responses has no such option) the model may
    // repeat the call until the token limit; the cut-off last call then keeps the SDK from
    // running any, so only the first call is checked there.
    if (provider === "openai") check(result.toolResults.length > 0, "tool did not run");
    return { toolCalls: valid.map((c) => ({ name: c.toolName, input: c.input })) };
  },

  async generateObject() {
    const result = await generateObject({
      model: model(),
      schema: CITY,
      prompt: "Name a city and its population.",
      maxOutputTokens: 64,
      temperature: 0,
    });
    check(typeof result.object.name === "string", "name is not a string");
    check(typeof result.object.population === "number", "population is not a number");
    return { object: result.object, warnings: result.warnings };
  },

  // z.number().int() adds minimum/maximum (+-Number.MAX_SAFE_INTEGER) to the JSON Schema.
  async intObject() {
    const result = await generateObject({
      model: model(),
      schema: z.object({ name: z.string(), population: z.number().int() }),
      prompt: "Name a city and its population.",
      maxOutputTokens: 64,
      temperature: 0,
    });
    check(Number.isInteger(result.object.population), "population is not an integer");
    return { object: result.object, warnings: result.warnings };
  },

  // generateObject's replacement in AI SDK 6+: structured output through generateText.
  async outputObject() {
    const result = await generateText({
      model: model(),
      output: Output.object({ schema: CITY }),
      prompt: "Name a city and its population.",
      maxOutputTokens: 64,
      temperature: 0,
    });
    check(typeof result.output.name === "string", "name is not a string");
    check(typeof result.output.population === "number", "population is not a number");
    return { object: result.output, warnings: result.warnings };
  },
};

try {
  const run = cases[name];
  if (!run) throw new Error(`unknown case ${name}`);
  console.log(JSON.stringify({ ok: true, provider, case: name, ...(await run()) }));
} catch (error) {
  console.log(JSON.stringify({ ok: false, provider, case: name, error: String(error?.stack ?? error) }));
  process.exit(1);
}
