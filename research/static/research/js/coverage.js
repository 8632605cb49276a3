// The coverage line beside the report: how much of what the research found the report uses, and its words
// against the length asked for (the snapshot's `coverage`, docs/api.md).
const number = (n) => n.toLocaleString("en-US");
const plural = (n, one, many) => (n === 1 ? one : many);

// The sentence, or "" while nothing of the report is written.
export function coverageText(coverage, hasReport) {
  if (!coverage || (!hasReport && !coverage.words)) return "";
  const c = coverage;
  return (
    `Cites ${number(c.pages_cited)} of ${number(c.pages_analysed)} analysed ` +
    `${plural(c.pages_analysed, "page", "pages")}; ` +
    `${number(c.findings_used)} of ${number(c.findings)} ${plural(c.findings, "finding", "findings")} ` +
    `${plural(c.findings_used, "was", "were")} given to the writer; ` +
    `${number(c.words)} of about ${number(c.report_words)} words.`
  );
}
