// Talking to this server only: every URL here is relative to the page's origin.

export class ServerError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    super(error.message || `The server answered ${status}.`);
    this.status = status;
    this.code = error.code || null;
    this.param = error.param || null;
  }
}

export class Api {
  constructor(getKey) {
    this.getKey = getKey;
  }

  headers(json) {
    const headers = {};
    const key = this.getKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    if (json) headers["Content-Type"] = "application/json";
    return headers;
  }

  async call(method, path, body) {
    const reply = await fetch(path, {
      method,
      headers: this.headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await reply.json().catch(() => null);
    if (!reply.ok) throw new ServerError(reply.status, data);
    return data;
  }

  models() { return this.call("GET", "/v1/models"); }
  health() { return fetch("/health").then((r) => r.json().catch(() => ({}))); }
  getResponse(id) { return this.call("GET", `/v1/responses/${encodeURIComponent(id)}`); }
  deleteResponse(id) { return this.call("DELETE", `/v1/responses/${encodeURIComponent(id)}`); }
  inputItems(id) { return this.call("GET", `/v1/responses/${encodeURIComponent(id)}/input_items?order=asc&limit=100`); }
  createConversation() { return this.call("POST", "/v1/conversations", {}); }
  getConversation(id) { return this.call("GET", `/v1/conversations/${encodeURIComponent(id)}`); }
  conversationItems(id) { return this.call("GET", `/v1/conversations/${encodeURIComponent(id)}/items?order=asc&limit=100`); }
  deleteConversation(id) { return this.call("DELETE", `/v1/conversations/${encodeURIComponent(id)}`); }

  // POST /v1/responses with stream: true; calls onEvent(event) for each SSE event.
  async stream(body, onEvent, signal) {
    const reply = await fetch("/v1/responses", {
      method: "POST",
      headers: this.headers(true),
      body: JSON.stringify({ ...body, stream: true }),
      signal,
    });
    if (!reply.ok) {
      throw new ServerError(reply.status, await reply.json().catch(() => null));
    }
    const reader = reply.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = frame
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) onEvent(JSON.parse(data));
      }
    }
  }
}
