"""Batch evaluation (`pagerag eval`): question formats, scoring, the run loop with resume,
summaries, the report in the paper's Table 1 / Table 3 layout, and plots.

    formats.py  load_questions(path) -> QASet (project JSONL or GraphRAG-Bench JSON, detected)
    scoring.py  strict / lenient / refusal / evidence recall for one answer
    grading.py  the optional LLM judge of lenient accuracy (prompts/judge_answer.txt)
    runner.py   run_eval(tasks, out, EvalConfig) -> EvalOutcome; results.jsonl as it goes
    summary.py  aggregate rows: accuracy, refusal, BBS, latency, QTok, BTok, per type
    report.py   report.md, report.json;  plots.py: the PNG plots
    calibrate.py  `pagerag calibrate`: refit the RCS gate on a user's labelled questions
    rcs/        `pagerag rcs-eval`: the RCS paper's multi-hop harness (corpora, feature tables,
                baselines, feature selection, reports, plots)
"""
