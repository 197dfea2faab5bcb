# One figure per job; its params are that figure's settings and caption. A spec edit also reruns the
# study's aggregation (the dataset keeps the resolved spec), so the study's figures are redrawn; no run reruns.
# Each figure is a `snakemake --report` item, captioned from the spec (ntkpipe.report).
import ntkpipe.jobs
from ntkpipe.resources import runtime_minutes


rule plot:
    input:
        lambda wc: WIRING.studies[wc.tag].dataset,
    output:
        report(f"{RESULTS}/{{tag}}/figures/{{figure}}.png", caption="../report/caption.rst", category="{tag}",
               subcategory="figures", labels={"item": "{figure}"}),
    log:
        f"{RESULTS}/logs/plot/{{tag}}/{{figure}}.log",
    params:
        config=lambda wc: WIRING.studies[wc.tag].figure_configs[wc.figure],
        caption=lambda wc: WIRING.studies[wc.tag].figure_captions[wc.figure],
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.plot_figure, INDEX.plans[wildcards.tag], wildcards.figure, output[0])
