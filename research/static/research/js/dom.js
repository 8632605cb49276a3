// Building DOM from data without ever parsing it as HTML: text goes in as text nodes, attributes one by one.

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "href") throw new Error("use link() for hrefs");
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// An outbound link: only for http(s) URLs, in a new tab without opener or referrer.
export function link(url, text, props = {}) {
  const el = h("a", props, text);
  let safe = null;
  try {
    const parsed = new URL(String(url));
    if (parsed.protocol === "http:" || parsed.protocol === "https:") safe = parsed.href;
  } catch {
    safe = null;
  }
  if (safe === null) return h("span", props, text);
  el.href = safe;
  el.target = "_blank";
  el.rel = "noopener noreferrer";
  return el;
}

// A link to a path of this app (a download, another page): same origin, same tab; anything but a path is text.
export function appLink(path, text, props = {}) {
  const value = String(path);
  if (!value.startsWith("/") || value.startsWith("//")) return h("span", props, text);
  const el = h("a", props, text);
  el.setAttribute("href", value);
  return el;
}

// Server-sanitised HTML (research/rendering.py) into `container`. DOMParser builds an inert document (no
// scripts run, nothing loads); links are re-checked here as a second line of defence.
export function setSanitisedHtml(container, html) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  for (const bad of doc.body.querySelectorAll("script, style, iframe, object, embed, img, form")) bad.remove();
  for (const el of doc.body.querySelectorAll("*")) {
    for (const attr of [...el.attributes]) {
      if (attr.name.startsWith("on") || attr.name === "style") el.removeAttribute(attr.name);
    }
  }
  for (const a of doc.body.querySelectorAll("a")) {
    let ok = false;
    try {
      const url = new URL(a.getAttribute("href") || "");
      ok = url.protocol === "http:" || url.protocol === "https:";
    } catch {
      ok = false;
    }
    if (!ok) a.removeAttribute("href");
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
  container.replaceChildren(...doc.body.childNodes);
}

export function show(el, visible) {
  el.hidden = !visible;
}

export function getCookie(name) {
  for (const part of document.cookie.split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key === name) return decodeURIComponent(rest.join("="));
  }
  return "";
}

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

// JSON API calls with the CSRF token; a 401 sends the user to the login page.
export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET") headers["X-CSRFToken"] = getCookie("csrftoken");
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
  });
  if (response.status === 401) {
    window.location.assign(`/accounts/login/?next=${encodeURIComponent(window.location.pathname)}`);
    throw new ApiError(401, "Please sign in again.");
  }
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("application/json") ? await response.json() : await response.text();
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(response.status, error.message || `Request failed (${response.status})`, error.field);
  }
  return data;
}
