// Vercel AI SDK cases against a running respond server, one case per process.
//
//   node ai_sdk.mjs <provider> <case> <base_url> <model>
//
// provider: "openai" (@ai-sdk/openai, createOpenAI({baseURL}).responses(model)) or
// "open-responses" (@ai-sdk/open-responses, createOpenResponses({url})).
// case: generateText | streamText | toolCall | requiredToolCall | generateObject |
// outputObject | intObject.
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

// Not strict (the AI SDK's default): respond still constrains the arguments to the schema,
// because the schema can be enforced.
const weather = tool({
  description: "The weather in a city",
  inputSchema: z.object({ city: z.string() }),
  execute: async ({ city }) => `Sunny in ${city}.`,
});

// zod's int() adds minimum/maximum (+-Number.MAX_SAFE_INTEGER); min/max add real bounds.
const forecast = tool({
  description: "The forecast for a city over some days",
  inputSchema: z.object({ city: z.string().max(20), days: z.number().int().min(1).max(7) }),
  execute: async ({ city, days }) => `Sunny in ${city} for ${days} days.`,
});

// Every call is valid against the tool's own schema (the SDK checks it), and ran.
function checkCalls(result, name) {
  const invalid = result.toolCalls.filter((call) => call.invalid);
  check(invalid.length === 0, `invalid tool calls: ${JSON.stringify(invalid)}`);
  check(result.toolCalls.length > 0, "no tool call");
  check(result.toolCalls.every((call) => call.toolName === name), "called another tool");
  check(result.finishReason === "tool-calls", `finishReason ${result.finishReason}`);
  check(result.toolResults.length === result.toolCalls.length, "a tool did not run");
  return {
    toolCalls: result.toolCalls.map((c) => ({ name: c.toolName, input: c.input })),
    warnings: result.warnings,
  };
}

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

  // Parallel calls allowed (the default): exact repeats of the call end the turn.
  async toolCall() {
    const result = await generateText({
      model: model(),
      prompt: "What is the weather in Paris?",
      tools: { weather },
      toolChoice: { type: "tool", toolName: "weather" },
      maxOutputTokens: 48,
      temperature: 0,
    });
    return checkCalls(result, "weather");
  },

  // toolChoice "required", a non-strict zod tool with integer bounds.
  async requiredToolCall() {
    const result = await generateText({
      model: model(),
      prompt: "What is the weather in Oslo for the next 3 days?",
      tools: { forecast },
      toolChoice: "required",
      maxOutputTokens: 64,
      temperature: 0,
    });
    const calls = checkCalls(result, "forecast");
    const days = calls.toolCalls[0].input.days;
    check(Number.isInteger(days) && days >= 1 && days <= 7, `days ${days}`);
    return calls;
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
