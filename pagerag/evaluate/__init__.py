"""Batch evaluation (`pagerag eval`): question formats, scoring, the run loop with resume,
summaries, the report in the paper's Table 1 / Table 3 layout, and plots.

    formats.py  load_questions(path) -> QASet (project JSONL or GraphRAG-Bench JSON, detected)
    scoring.py  strict / lenient / refusal / evidence recall for one answer
    judge.py    the optional LLM judge of lenient accuracy (prompts/judge_answer.txt)
    runner.py   run_eval(tasks, out, EvalConfig) -> EvalOutcome; results.jsonl as it goes
    summary.py  aggregate rows: accuracy, refusal, BBS, latency, QTok, BTok, per type
    report.py   report.md, report.json;  plots.py: the PNG plots
"""
