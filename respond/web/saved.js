// What the page keeps in this browser only: the settings, the API key, and the ids of the
// responses and conversations it created (the API has no "list responses" endpoint).

const SETTINGS = "respond.playground.settings";
const SAVED = "respond.playground.saved";
const LIMIT = 200;

function read(name, fallback) {
  try {
    return JSON.parse(localStorage.getItem(name)) ?? fallback;
  } catch {
    return fallback;
  }
}

export function loadSettings() {
  return read(SETTINGS, {});
}

export function saveSettings(settings) {
  localStorage.setItem(SETTINGS, JSON.stringify(settings));
}

// Entries are grouped by a tag of the API key, so each key sees what it created.
function keyTag(key) {
  let hash = 0x811c9dc5; // FNV-1a: a label, not a secret
  for (const ch of key || "") {
    hash ^= ch.codePointAt(0);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash.toString(16);
}

export function savedFor(key) {
  const tag = keyTag(key);
  return read(SAVED, []).filter((entry) => entry.key === tag);
}

export function remember(key, kind, id, label) {
  const entries = read(SAVED, []).filter((entry) => entry.id !== id);
  entries.unshift({ key: keyTag(key), kind, id, label: label.slice(0, 80), at: Date.now() });
  localStorage.setItem(SAVED, JSON.stringify(entries.slice(0, LIMIT)));
}

export function forget(id) {
  localStorage.setItem(SAVED, JSON.stringify(read(SAVED, []).filter((entry) => entry.id !== id)));
}
