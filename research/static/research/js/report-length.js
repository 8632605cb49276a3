// The start form's report length: a named length (brief, standard, long) or a number of words, sent as
// `report_length` (docs/api.md).
const CUSTOM = "words";

// Shows the words field only when "A number of words" is chosen.
export function syncReportLength(root) {
  const custom = root.querySelector("#report-length").value === CUSTOM;
  root.querySelector("#report-words-field").hidden = !custom;
}

// { value } to send as report_length, or { error } naming what to fix.
export function readReportLength(root) {
  const choice = root.querySelector("#report-length").value;
  if (choice !== CUSTOM) return { value: choice };
  const input = root.querySelector("#report-words");
  const min = Number(input.min);
  const max = Number(input.max);
  const value = Number(input.value.trim());
  if (!input.value.trim() || !Number.isInteger(value) || value < min || value > max) {
    const range = `${min.toLocaleString("en-US")} to ${max.toLocaleString("en-US")}`;
    return { error: `Report length must be a whole number of words from ${range}.` };
  }
  return { value };
}

export function clearReportLength(root) {
  root.querySelector("#report-length").value = "standard";
  root.querySelector("#report-words").value = "";
  syncReportLength(root);
}
