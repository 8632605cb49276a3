// Websocket feeds with reconnection. The server is the record: a feed that misses anything asks for it again.

import { applyDelta } from "./state.js";

function socketUrl(path) {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${window.location.host}${path}`;
}

const MAX_BACKOFF_MS = 15000;

class Feed {
  constructor(path, onStatus) {
    this.path = path;
    this.onStatus = onStatus || (() => {});
    this.ws = null;
    this.closed = false;
    this.attempt = 0;
    this.timer = null;
  }

  start() {
    this.connect();
    return this;
  }

  connect() {
    if (this.closed) return;
    const ws = new WebSocket(socketUrl(this.pathForConnect()));
    this.ws = ws;
    let opened = false;
    ws.addEventListener("open", () => {
      opened = true;
      this.attempt = 0;
      this.onStatus("live");
    });
    const parts = new Map(); // a message too large to send whole comes in parts: id → texts received
    ws.addEventListener("message", (message) => {
      let data;
      try {
        data = JSON.parse(message.data);
        if (data && data.type === "part") {
          const texts = parts.get(data.id) || [];
          texts[data.index] = String(data.text);
          parts.set(data.id, texts);
          if (texts.filter((text) => text !== undefined).length < data.count) return;
          parts.delete(data.id);
          data = JSON.parse(texts.join(""));
        }
      } catch {
        return;
      }
      this.receive(data);
    });
    ws.addEventListener("close", () => {
      if (this.ws !== ws || this.closed) return;
      this.ws = null;
      this.onClosed();
      this.onStatus("reconnecting");
      this.attempt += 1;
      // A socket refused before it opened is asked about at once (a deleted research is "Not found" now, not
      // after seconds of "Reconnecting…"); after that, and after a socket that was open, with backoff.
      const first = !opened && this.attempt === 1;
      const delay = first ? 0 : Math.min(MAX_BACKOFF_MS, 500 * 2 ** Math.min(this.attempt, 5)) * (0.75 + Math.random() / 2);
      this.timer = window.setTimeout(() => this.retry(opened), delay);
    });
  }

  // A socket refused at the handshake looks like a network failure; ask the API whether we may watch at all.
  async retry(wasOpen) {
    if (this.closed) return;
    if (!wasOpen && !(await this.allowed())) {
      this.onStatus("gone");
      return;
    }
    this.connect();
  }

  async allowed() {
    return true;
  }

  pathForConnect() {
    return this.path;
  }

  onClosed() {}

  send(message) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.ws.send(JSON.stringify(message));
      return true;
    }
    return false;
  }

  close() {
    this.closed = true;
    window.clearTimeout(this.timer);
    if (this.ws) this.ws.close();
    this.ws = null;
  }
}

// `/ws/research/`: the user's researches for the sidebar.
export class SidebarFeed extends Feed {
  constructor({ onList, onItem, onStatus }) {
    super("/ws/research/", onStatus);
    this.onList = onList;
    this.onItem = onItem;
  }

  receive(message) {
    if (message.type === "researches") this.onList(message.researches || []);
    else if (message.type === "research" && message.research) this.onItem(message.research);
  }

  // Ask for the whole list again: the answer repairs whatever a lost push left wrong.
  refresh() {
    return this.send({ type: "list" });
  }
}

// `/ws/research/<id>/`: the full history and state on connect, then coalesced updates, each with the delta of the
// state since the update before. Events are delivered to `onEvents` exactly once and in seq order; the state, after
// each history or delta, to `onSnapshot`. A gap (a lost push, or a delta that does not follow the state held)
// triggers a catch_up, which brings the whole state again; a reconnect asks for `?after=<seq>`.
export class ResearchFeed extends Feed {
  constructor(researchId, { onEvents, onSnapshot, onStatus }) {
    super(`/ws/research/${researchId}/`, onStatus);
    this.researchId = researchId;
    this.onEvents = onEvents;
    this.onSnapshot = onSnapshot;
    this.lastSeq = 0;
    this.state = null;
    this.snapshotSeq = -1;
    this.catchingUp = false;
    this.behindTimer = null;
  }

  pathForConnect() {
    return this.lastSeq ? `${this.path}?after=${this.lastSeq}` : this.path;
  }

  async allowed() {
    try {
      const response = await fetch(`/api/research/${this.researchId}`, { credentials: "same-origin" });
      if (response.status === 401) window.location.assign("/accounts/login/");
      return response.status !== 404; // gone, or never ours; a server restarting (5xx) is worth waiting for
    } catch {
      return true; // the network is down: keep trying
    }
  }

  onClosed() {
    this.catchingUp = false;
  }

  receive(message) {
    if (message.type === "history") this.catchingUp = false;
    if (message.type === "history" || message.type === "update") {
      this.take(Array.isArray(message.events) ? message.events : []);
      if (message.type === "history" && message.snapshot) this.takeSnapshot(message.snapshot);
      if (message.type === "update" && message.delta) this.takeDelta(message.delta);
    }
  }

  takeDelta(delta) {
    const seq = this.state ? this.state.research.last_event_seq : 0;
    if (this.state && delta.research.last_event_seq < seq) return; // read before the state we hold
    const next = delta.base <= seq ? applyDelta(this.state, delta) : null;
    if (next === null) {
      this.catchUp(); // we lack the state this delta follows
      return;
    }
    this.takeSnapshot(next);
  }

  take(events) {
    const fresh = [];
    for (const event of events) {
      if (event.seq <= this.lastSeq) continue; // already shown (pushes and history can overlap)
      if (event.seq !== this.lastSeq + 1) {
        this.catchUp();
        break;
      }
      fresh.push(event);
      this.lastSeq = event.seq;
    }
    if (fresh.length) this.onEvents(fresh);
  }

  takeSnapshot(snapshot) {
    const seq = snapshot.research ? snapshot.research.last_event_seq : 0;
    if (seq < this.snapshotSeq) return; // an older state than the one shown
    this.snapshotSeq = seq;
    this.state = snapshot;
    this.onSnapshot(snapshot);
    // The snapshot knows of events we have not received: the push carrying them may still be on its way, so
    // give it a moment before asking.
    window.clearTimeout(this.behindTimer);
    if (seq > this.lastSeq) {
      this.behindTimer = window.setTimeout(() => {
        if (this.snapshotSeq > this.lastSeq) this.catchUp();
      }, 1500);
    }
  }

  catchUp() {
    if (this.catchingUp) return;
    this.catchingUp = this.send({ type: "catch_up", after: this.lastSeq });
  }

  close() {
    window.clearTimeout(this.behindTimer);
    super.close();
  }
}
