// The documents page: the upload form sent to /api/documents/ with a progress bar, the result listed by file,
// and the lists redrawn from the API. Without this script the same forms post to the page (templates/research/
// documents.html). Everything the server sends is written as text (dom.js), never parsed as HTML.

import { api, ApiError, getCookie, h, show } from "./dom.js";

const form = document.getElementById("upload-form");
const input = document.getElementById("upload-files");
const button = document.getElementById("upload-button");
const bar = document.getElementById("upload-progress");
const status = document.getElementById("upload-status");
const result = document.getElementById("upload-result");
const resultBody = document.getElementById("upload-result-body");

function formatSize(bytes) {
  if (bytes >= 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}

// XMLHttpRequest, not fetch: only it reports the progress of a request's body as it is sent.
function send(data, onProgress) {
  return new Promise((resolve, reject) => {
    const request = new XMLHttpRequest();
    request.open("POST", form.dataset.api);
    request.setRequestHeader("Accept", "application/json");
    request.setRequestHeader("X-CSRFToken", getCookie("csrftoken"));
    request.responseType = "text";
    request.upload.addEventListener("progress", (event) => {
      if (event.lengthComputable) onProgress(event.loaded / event.total);
    });
    request.addEventListener("load", () => {
      let body = null;
      try {
        body = JSON.parse(request.responseText);
      } catch {
        body = null;
      }
      resolve({ status: request.status, body });
    });
    request.addEventListener("error", () => reject(new Error("The upload was interrupted.")));
    request.addEventListener("abort", () => reject(new Error("The upload was cancelled.")));
    request.send(data);
  });
}

function showResult(body) {
  const parts = [];
  if (body && body.error) parts.push(h("p", { class: "form-error", role: "alert", text: body.error.message }));
  const indexed = (body && body.documents) || [];
  const failed = (body && body.failed) || [];
  if (indexed.length) {
    parts.push(h("p", { text: "Indexed:" }));
    parts.push(
      h(
        "ul",
        { class: "upload-indexed" },
        indexed.map((doc) => h("li", {}, doc.name, " ", h("span", { class: "muted", text: `(${doc.status})` }))),
      ),
    );
  }
  if (failed.length) {
    parts.push(h("p", { text: "Not indexed:" }));
    parts.push(h("ul", { class: "upload-failed" }, failed.map((f) => h("li", { text: `${f.name}: ${f.reason}` }))));
  }
  resultBody.replaceChildren(...parts);
  show(result, parts.length > 0);
}

function row(doc) {
  const anchor = h("a", { target: "_blank", rel: "noopener noreferrer", text: doc.title });
  anchor.setAttribute("href", `/collection/${Number(doc.id)}/`);
  const details = `${doc.name} · ${formatSize(doc.size)}${doc.mine && doc.shared ? " · shared with everyone" : ""}`;
  const item = h("li", { dataset: { documentId: String(doc.id) } }, anchor, " ", h("span", { class: "muted", text: details }));
  if (doc.mine) {
    const remove = h(
      "form",
      { method: "post", action: `/documents/${Number(doc.id)}/delete/`, class: "document-delete" },
      h("input", { type: "hidden", name: "csrfmiddlewaretoken", value: getCookie("csrftoken") }),
      h("button", {
        type: "submit",
        class: "button button-danger button-small",
        "aria-label": `Delete ${doc.name}`,
        text: "Delete",
      }),
    );
    item.append(" ", remove);
  }
  return item;
}

async function refresh() {
  const { documents } = await api(form.dataset.api);
  const mine = documents.filter((doc) => doc.mine);
  const shared = documents.filter((doc) => !doc.mine);
  document.getElementById("mine-list").replaceChildren(...mine.map(row));
  document.getElementById("shared-list").replaceChildren(...shared.map(row));
  show(document.getElementById("mine-empty"), mine.length === 0);
  show(document.getElementById("shared-empty"), shared.length === 0);
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const files = [...input.files];
  if (!files.length) {
    status.textContent = "Choose one or more files first.";
    return;
  }
  const total = files.reduce((sum, file) => sum + file.size, 0);
  if (total > Number(form.dataset.maxBytes)) {
    // Said here, before the bytes travel; the server refuses it as well (413).
    status.textContent = `Too large: ${formatSize(total)}, over the ${formatSize(Number(form.dataset.maxBytes))} an upload may be.`;
    return;
  }
  const data = new FormData();
  for (const file of files) data.append("files", file, file.name);
  button.disabled = true;
  bar.value = 0;
  show(bar, true);
  status.textContent = `Uploading ${files.length} file${files.length === 1 ? "" : "s"}…`;
  try {
    const answer = await send(data, (fraction) => {
      bar.value = Math.round(fraction * 100);
      if (fraction >= 1) status.textContent = "Uploaded; reading and indexing the documents…";
    });
    if (answer.status === 401) {
      window.location.assign(`/accounts/login/?next=${encodeURIComponent(window.location.pathname)}`);
      return;
    }
    const indexed = (answer.body && answer.body.documents) || [];
    const failed = (answer.body && answer.body.failed) || [];
    showResult(answer.body || { error: { message: `The upload failed (${answer.status}).` } });
    status.textContent =
      answer.status === 201
        ? `Indexed ${indexed.length} document${indexed.length === 1 ? "" : "s"}${failed.length ? `; ${failed.length} not indexed` : ""}.`
        : "Nothing was indexed.";
    if (answer.status === 201) {
      form.reset();
      await refresh();
    }
  } catch (error) {
    status.textContent = error.message;
  } finally {
    button.disabled = false;
    show(bar, false);
  }
});

// Delete through the API and redraw, instead of the form's round trip through the page.
document.addEventListener("submit", async (event) => {
  const target = event.target;
  if (!(target instanceof HTMLFormElement) || !target.classList.contains("document-delete")) return;
  event.preventDefault();
  const item = target.closest("li");
  const id = Number(item && item.dataset.documentId);
  try {
    await api(`${form.dataset.api}${id}/`, { method: "DELETE" });
    status.textContent = "Deleted.";
    await refresh();
  } catch (error) {
    status.textContent = error instanceof ApiError ? error.message : "The document could not be deleted.";
  }
});
