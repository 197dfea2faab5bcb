# One index.md per study: every figure with its paper panel, caption and checker defects (read from the
# PNGs' metadata), the table with its row count and the claims with their verdicts; linked from the report.
import ntkpipe.jobs


rule index:
    input:
        figures=lambda wc: list(WIRING.studies[wc.tag].figures.values()),
        table=lambda wc: WIRING.studies[wc.tag].table,
        claims=lambda wc: [WIRING.studies[wc.tag].claims_table] if WIRING.studies[wc.tag].claims_table else [],
        phases=lambda wc: [WIRING.studies[wc.tag].phase_table] if WIRING.studies[wc.tag].phase_table else [],
    output:
        report(f"{RESULTS}/{{tag}}/index.md", caption="../report/caption.rst", category="{tag}",
               subcategory="index", labels={"item": "index"}),
    log:
        f"{RESULTS}/logs/index/{{tag}}.log",
    params:
        caption=lambda wc: f"Index of study {wc.tag}: every figure with the paper panel it reproduces, its caption "
                           "and any checker defects, the table with its row count, and the paper's claims checked.",
    resources:
        mem_mb=1024,
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.study_index_file, INDEX.plans[wildcards.tag], output[0])
