// Building the transcript: one turn per request, one element per output item.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== false && value !== null && value !== undefined) node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

export function userTurn(text, label = "You") {
  return el("div", { class: "turn user" }, el("div", { class: "who", text: label }), el("div", { class: "text", text }));
}

export function toolResultTurn(callId, output) {
  return el(
    "div",
    { class: "turn user" },
    el("div", { class: "who", text: "You · tool result" }),
    el(
      "div",
      { class: "item function_call_output", "data-call-id": callId },
      el("div", { class: "item-head", text: `function_call_output · ${callId}` }),
      el("pre", { class: "args", text: output }),
    ),
  );
}

export function errorTurn(error) {
  const where = [error.status && `HTTP ${error.status}`, error.code, error.param && `param: ${error.param}`]
    .filter(Boolean)
    .join(" · ");
  return el(
    "div",
    { class: "turn error", role: "alert" },
    el("div", { class: "who", text: "Server error" }),
    el("div", { class: "text error-message", text: error.message }),
    where ? el("div", { class: "meta", text: where }) : null,
  );
}

function formatMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

// One assistant answer as it streams in; onToolReply(callId, output) answers a call by hand.
export class TurnView {
  constructor(model, onToolReply, onInspect) {
    this.onToolReply = onToolReply;
    this.onInspect = onInspect;
    this.items = new Map(); // output_index -> { node, text }
    this.started = performance.now();
    this.firstDelta = null;
    this.body = el("div", { class: "items" });
    this.meta = el("div", { class: "meta", text: "waiting for the first token…" });
    this.node = el(
      "div",
      { class: "turn assistant", "data-status": "in_progress" },
      el("div", { class: "who", text: model || "assistant" }),
      this.body,
      this.meta,
    );
  }

  handle(event) {
    const handler = {
      "response.created": () => { this.responseId = event.response.id; this.node.dataset.responseId = event.response.id; },
      "response.output_item.added": () => this.addItem(event.output_index, event.item),
      "response.output_text.delta": () => this.append(event.output_index, event.delta),
      "response.reasoning.delta": () => this.append(event.output_index, event.delta),
      "response.reasoning_summary_text.delta": () => this.append(event.output_index, event.delta),
      "response.function_call_arguments.delta": () => this.append(event.output_index, event.delta),
      "response.custom_tool_call_input.delta": () => this.append(event.output_index, event.delta),
      "response.output_item.done": () => this.finishItem(event.output_index, event.item),
      "response.completed": () => this.finish(event.response),
      "response.incomplete": () => this.finish(event.response),
      "response.failed": () => this.finish(event.response),
      error: () => this.fail(event.error || event),
    }[event.type];
    if (handler) handler();
  }

  addItem(index, item) {
    let view;
    if (item.type === "reasoning") {
      const text = el("div", { class: "text" });
      view = { node: el("details", { class: "item reasoning", open: "" }, el("summary", { text: "Reasoning" }), text), text };
    } else if (item.type === "function_call" || item.type === "custom_tool_call") {
      view = this.callView(item);
    } else {
      const text = el("div", { class: "text" });
      view = { node: el("div", { class: `item ${item.type}` }, text), text };
    }
    view.node.dataset.deltas = "0";
    this.items.set(index, view);
    this.body.append(view.node);
  }

  callView(item) {
    const text = el("pre", { class: "args" });
    const answer = el("textarea", { rows: "2", class: "tool-output", placeholder: "The result to send back, e.g. {\"temperature\": 21}" });
    const form = el(
      "form",
      {
        class: "tool-reply",
        onsubmit: (e) => {
          e.preventDefault();
          form.querySelector("button").disabled = true;
          this.onToolReply(item.call_id, answer.value);
        },
      },
      answer,
      el("button", { type: "submit", text: "Send result" }),
    );
    const node = el(
      "div",
      { class: `item ${item.type}`, "data-call-id": item.call_id, "data-name": item.name },
      el("div", { class: "item-head" }, el("span", { class: "badge", text: "tool call" }), el("strong", { class: "tool-name", text: item.name }), el("code", { text: item.call_id })),
      text,
      form,
    );
    return { node, text };
  }

  append(index, delta) {
    const view = this.items.get(index);
    if (!view) return;
    if (this.firstDelta === null) this.firstDelta = performance.now();
    view.text.textContent += delta;
    view.node.dataset.deltas = String(Number(view.node.dataset.deltas) + 1);
    this.meta.textContent = "streaming…";
  }

  finishItem(index, item) {
    const view = this.items.get(index);
    if (!view) return;
    if (item.type === "function_call") view.text.textContent = prettyJson(item.arguments);
    if (item.type === "custom_tool_call") view.text.textContent = item.input;
    if (item.type === "message") {
      const text = (item.content || []).map((part) => part.text || part.refusal || "").join("");
      if (text) view.text.textContent = text;
    }
    view.node.dataset.done = "true";
  }

  finish(response) {
    const ended = performance.now();
    this.node.dataset.status = response.status;
    const usage = response.usage;
    const parts = [response.status];
    if (response.status === "incomplete" && response.incomplete_details) parts.push(response.incomplete_details.reason);
    if (usage) {
      const cached = usage.input_tokens_details ? usage.input_tokens_details.cached_tokens : 0;
      parts.push(`${usage.input_tokens} in (${cached} cached) · ${usage.output_tokens} out`);
    }
    if (this.firstDelta !== null) parts.push(`first token ${formatMs(this.firstDelta - this.started)}`);
    parts.push(`total ${formatMs(ended - this.started)}`);
    if (usage && this.firstDelta !== null && ended > this.firstDelta) {
      parts.push(`${(usage.output_tokens / ((ended - this.firstDelta) / 1000)).toFixed(1)} tok/s`);
    }
    this.meta.replaceChildren(
      el("span", { class: "usage", text: parts.join(" · ") }),
      el("button", { type: "button", class: "link", text: response.id, onclick: () => this.onInspect("response", response.id) }),
    );
    if (response.error) this.body.append(errorTurn(response.error));
    this.response = response;
  }

  fail(error) {
    this.node.dataset.status = "failed";
    this.body.append(errorTurn(error));
  }
}

function prettyJson(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
