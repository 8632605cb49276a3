"""The quality bench: a fictional company's document share, due-diligence checkpoints and a grader for reports."""
