// A research's state on the page: the snapshot of the last history message, with every push's delta applied.
// The same rules as apply_delta in devtools/deltas.py (the reference implementation): `research`, `progress`
// and `coverage` replace theirs, whole documents replace theirs, and each keyed collection comes with the order of
// all its keys and the rows that changed, so rows missing from the order are gone.

const MEMORY_SECTIONS = ["insights", "gaps", "contradictions"];

function emptyState() {
  const memory = {};
  for (const section of MEMORY_SECTIONS) memory[section] = [];
  return {
    questions: [],
    conversation: [],
    queries: [],
    memory,
    report: null,
    report_versions: [],
    report_sections: [],
    error_output: null,
  };
}

class Mismatch extends Error {}

function take(rows, key) {
  if (!rows.has(key)) throw new Mismatch(`the delta names a row the state does not have: ${key}`);
  return rows.get(key);
}

function merge(rows, change, key) {
  const old = new Map(rows.map((row) => [row[key], row]));
  const fresh = new Map(change.rows.map((row) => [row[key], row]));
  return change.order.map((k) => (fresh.has(k) ? fresh.get(k) : take(old, k)));
}

// The state after `delta`, or null when the delta does not follow `state` (the caller then asks for the whole
// state again). `state` is not modified: the new state shares the rows that did not change.
export function applyDelta(state, delta) {
  if (!state && delta.base !== 0) return null;
  const base = state || emptyState();
  try {
    const next = {
      ...base,
      version: delta.snapshot_version,
      research: delta.research,
      progress: delta.progress,
      coverage: delta.coverage,
    };
    for (const key of ["questions", "conversation", "report", "report_versions", "error_output"]) {
      if (key in delta) next[key] = delta[key];
    }
    if (delta.queries) {
      const old = new Map(base.queries.map((query) => [query.id, query]));
      const fresh = new Map(delta.queries.rows.map((query) => [query.id, query]));
      next.queries = delta.queries.order.map((id) => {
        if (!fresh.has(id)) return take(old, id);
        return { ...fresh.get(id), websites: old.has(id) ? old.get(id).websites : [] };
      });
    }
    if (delta.websites) {
      const index = new Map(next.queries.map((query, i) => [query.id, i]));
      next.queries = [...next.queries];
      for (const group of delta.websites) {
        const i = take(index, group.query_id);
        next.queries[i] = { ...next.queries[i], websites: merge(next.queries[i].websites, group, "id") };
      }
    }
    if (delta.memory) {
      next.memory = { ...base.memory };
      for (const [section, change] of Object.entries(delta.memory)) {
        next.memory[section] = merge(base.memory[section] || [], change, "id");
      }
    }
    next.report_sections = merge(base.report_sections, delta.report_sections, "position");
    return next;
  } catch (error) {
    if (error instanceof Mismatch) return null;
    throw error;
  }
}
