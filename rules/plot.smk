# One figure per job; its params are that figure's settings and caption. A spec edit also reruns the
# study's aggregation (the dataset keeps the resolved spec), so the study's figures are redrawn; no run reruns.
# Each figure is a `snakemake --report` item, captioned from the spec (ntkpipe.report).
import ntkpipe.jobs
from ntkpipe.report import figure_caption
from ntkpipe.resources import runtime_minutes
from ntkpipe.lang.identity import canonical_json


rule plot:
    input:
        lambda wc: INDEX.plans[wc.tag].dataset_path,
    output:
        report(f"{RESULTS}/{{tag}}/figures/{{figure}}.png", caption="../report/caption.rst", category="{tag}",
               subcategory="figures", labels={"item": "{figure}"}),
    log:
        f"{RESULTS}/logs/plot/{{tag}}/{{figure}}.log",
    params:
        config=lambda wc: canonical_json(INDEX.plans[wc.tag].figure_config(wc.figure)),
        caption=lambda wc: figure_caption(INDEX.plans[wc.tag], wc.figure),
    resources:
        mem_mb=2048,
        runtime=runtime_minutes("plot", config),
    run:
        ntkpipe.jobs.logged(log[0], ntkpipe.jobs.plot_figure, INDEX.plans[wildcards.tag], wildcards.figure, output[0])
