// The playground: settings on the left, the conversation in the middle, details on the right.
import { Api } from "./api.js";
import { el, errorTurn, toolResultTurn, TurnView, userTurn } from "./render.js";
import { forget, loadSettings, remember, savedFor, saveSettings } from "./saved.js";

const $ = (id) => document.getElementById(id);
const FIELDS = {
  apiKey: "api-key",
  instructions: "instructions",
  temperature: "temperature",
  maxOutputTokens: "max-output-tokens",
  reasoningEffort: "reasoning-effort",
  chainMode: "chain-mode",
  tools: "tools",
  toolChoice: "tool-choice",
};

const emptyHint = $("empty-hint");
const api = new Api(() => $("api-key").value.trim());
const chat = {
  previousId: null, // the last response, for previous_response_id
  conversationId: null,
  local: [], // every item of this chat, sent whole when nothing is stored
  running: null, // AbortController of the request in flight
  model: null,
};

// ---------------------------------------------------------------- settings

function restoreSettings() {
  const saved = loadSettings();
  for (const [name, id] of Object.entries(FIELDS)) if (saved[name] !== undefined) $(id).value = saved[name];
  if (saved.store !== undefined) $("store").checked = saved.store;
  chat.model = saved.model || null;
}

function storeSettings() {
  const settings = { model: $("model").value, store: $("store").checked };
  for (const [name, id] of Object.entries(FIELDS)) settings[name] = $(id).value;
  saveSettings(settings);
}

function parseTools() {
  const text = $("tools").value.trim();
  $("tools-error").hidden = true;
  if (!text) return [];
  try {
    const tools = JSON.parse(text);
    if (!Array.isArray(tools)) throw new Error("expected a JSON array of tools");
    return tools;
  } catch (error) {
    $("tools-error").textContent = `Tools: ${error.message}`;
    $("tools-error").hidden = false;
    throw error;
  }
}

function refreshToolChoices() {
  let names = [];
  try {
    names = parseTools().filter((t) => t.type === "function").map((t) => t.name);
  } catch {
    return;
  }
  const select = $("tool-choice");
  const current = select.value;
  const options = ["auto", "required", "none", ...names.map((n) => `function:${n}`)];
  select.replaceChildren(...options.map((value) => el("option", { value, text: value.replace("function:", "call ") })));
  select.value = options.includes(current) ? current : "auto";
}

function toolChoice() {
  const value = $("tool-choice").value;
  return value.startsWith("function:") ? { type: "function", name: value.slice(9) } : value;
}

// ---------------------------------------------------------------- sending

function requestBody(input) {
  const body = { model: $("model").value || undefined, store: $("store").checked };
  const instructions = $("instructions").value.trim();
  if (instructions) body.instructions = instructions;
  const temperature = $("temperature").value;
  if (temperature !== "") body.temperature = Number(temperature);
  const maxTokens = $("max-output-tokens").value;
  if (maxTokens !== "") body.max_output_tokens = Number(maxTokens);
  const effort = $("reasoning-effort").value;
  if (effort) body.reasoning = { effort };
  const tools = parseTools();
  if (tools.length) {
    body.tools = tools;
    body.tool_choice = toolChoice();
  }
  const mode = $("chain-mode").value;
  if (mode === "conversation") body.conversation = chat.conversationId;
  else if (mode === "previous" && body.store && chat.previousId) body.previous_response_id = chat.previousId;
  // Without a stored response to point at, the page sends the whole chat itself.
  const whole = mode === "previous" && !body.store;
  body.input = whole ? [...chat.local, ...input] : input;
  return body;
}

async function send(input, shown, label) {
  if (chat.running) return;
  let body;
  try {
    if ($("chain-mode").value === "conversation" && !chat.conversationId) {
      const conversation = await api.createConversation();
      chat.conversationId = conversation.id;
      remember(api.getKey(), "conversation", conversation.id, label);
      renderHistory();
    }
    body = requestBody(input);
  } catch (error) {
    if (error.status) append(errorTurn(error));
    return;
  }
  storeSettings();
  append(shown);
  const turn = new TurnView(body.model, reply, inspect);
  append(turn.node);
  chat.running = new AbortController();
  setBusy(true);
  try {
    await api.stream(body, (event) => {
      turn.handle(event);
      scrollDown();
    }, chat.running.signal);
    finishTurn(turn, input, label);
  } catch (error) {
    turn.node.remove();
    if (error.name !== "AbortError") append(errorTurn(error));
  } finally {
    chat.running = null;
    setBusy(false);
  }
}

function finishTurn(turn, input, label) {
  const response = turn.response;
  if (!response) return;
  chat.local.push(...input, ...response.output);
  if (response.status !== "failed") chat.previousId = response.id;
  if (response.store) remember(api.getKey(), "response", response.id, label);
  renderHistory();
}

function sendMessage() {
  const text = $("message").value.trim();
  if (!text) return;
  $("message").value = "";
  send([{ type: "message", role: "user", content: text }], userTurn(text), text);
}

function reply(callId, output) {
  send([{ type: "function_call_output", call_id: callId, output }], toolResultTurn(callId, output), `tool result ${callId}`);
}

function newChat() {
  chat.running?.abort();
  Object.assign(chat, { previousId: null, conversationId: null, local: [] });
  $("transcript").replaceChildren(emptyHint);
}

function append(node) {
  emptyHint.remove();
  $("transcript").append(node);
  scrollDown();
}

function scrollDown() {
  const box = $("transcript");
  box.scrollTop = box.scrollHeight;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  document.body.dataset.busy = busy ? "true" : "false";
}

// ---------------------------------------------------------------- stored things

async function inspect(kind, id, what = "object") {
  const panel = $("inspector");
  panel.hidden = false;
  $("inspector-title").textContent = `${kind} ${id}${what === "items" ? " · items" : ""}`;
  $("inspector-body").textContent = "loading…";
  try {
    const data = kind === "response"
      ? await (what === "items" ? api.inputItems(id) : api.getResponse(id))
      : await (what === "items" ? api.conversationItems(id) : api.getConversation(id));
    $("inspector-body").textContent = JSON.stringify(data, null, 2);
  } catch (error) {
    $("inspector-body").textContent = `${error.message}${error.status ? ` (HTTP ${error.status})` : ""}`;
  }
}

async function remove(kind, id) {
  try {
    await (kind === "response" ? api.deleteResponse(id) : api.deleteConversation(id));
  } catch (error) {
    if (error.status !== 404) {
      append(errorTurn(error));
      return;
    }
  }
  forget(id);
  renderHistory();
}

function renderHistory() {
  const entries = savedFor(api.getKey());
  const items = entries.map((entry) =>
    el(
      "li",
      { "data-id": entry.id, "data-kind": entry.kind },
      el("div", { class: "label" }, el("span", { class: "badge", text: entry.kind === "response" ? "resp" : "conv" }), el("span", { text: entry.label || entry.id })),
      el(
        "div",
        { class: "buttons" },
        el("button", { type: "button", class: "link", text: "open", onclick: () => inspect(entry.kind, entry.id) }),
        el("button", { type: "button", class: "link", text: entry.kind === "response" ? "input items" : "items", onclick: () => inspect(entry.kind, entry.id, "items") }),
        el("button", { type: "button", class: "link danger", text: "delete", onclick: () => remove(entry.kind, entry.id) }),
      ),
    ),
  );
  $("history").replaceChildren(...(items.length ? items : [el("li", { class: "hint", text: "nothing yet" })]));
}

// ---------------------------------------------------------------- start

async function loadModels() {
  const status = $("server-status");
  try {
    const models = await api.models();
    const select = $("model");
    // The embedding model is listed too; it cannot chat.
    const chatModels = models.data.filter((m) => m.meta?.type !== "embedding");
    select.replaceChildren(...chatModels.map((m) => el("option", { value: m.id, text: m.id })));
    if (chat.model && chatModels.some((m) => m.id === chat.model)) select.value = chat.model;
    const health = await api.health();
    status.textContent = health.status === "ok" ? "ready" : health.status || "unknown";
    status.dataset.state = health.status === "ok" ? "ok" : "warn";
  } catch (error) {
    const key = api.getKey() ? "API key rejected" : "API key needed";
    status.textContent = error.status === 401 ? key : "unreachable";
    status.dataset.state = "error";
  }
}

function start() {
  restoreSettings();
  refreshToolChoices();
  const { toolChoice: savedChoice } = loadSettings();
  if (savedChoice && [...$("tool-choice").options].some((o) => o.value === savedChoice)) $("tool-choice").value = savedChoice;
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); sendMessage(); });
  $("message").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); sendMessage(); }
  });
  $("new-chat").addEventListener("click", newChat);
  $("stop").addEventListener("click", () => chat.running?.abort());
  $("tools").addEventListener("change", refreshToolChoices);
  $("api-key").addEventListener("change", () => { storeSettings(); renderHistory(); loadModels(); });
  $("inspector-close").addEventListener("click", () => { $("inspector").hidden = true; });
  for (const id of Object.values(FIELDS)) $(id).addEventListener("change", storeSettings);
  $("store").addEventListener("change", storeSettings);
  $("model").addEventListener("change", storeSettings);
  renderHistory();
  loadModels();
  document.body.dataset.ready = "true";
}

start();
