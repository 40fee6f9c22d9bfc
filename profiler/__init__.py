"""Solo profiles of jobs: perf runs and parsing, the SQLite profile store, features and their pipeline.

Imports nothing else of ours (env depends on profiler, never the reverse). The modules:

* ``events``    the paper's twelve perf events, software vs hardware
* ``perfcsv``   ``parse_perf_csv(text) -> PerfStat``: perf stat -x CSV, field by field
* ``perfrun``   ``run_under_perf(argv, ...) -> PerfRun``: one run under perf (also used by the batch runner)
* ``profiling`` ``profile_command(name, argv, node_id, ...) -> Profile``: solo run + one-core run (scale factor)
* ``adaptivity`` ``probe_giveback(...)``: whether a program adapts to CPUs taken from it while it runs, measured
* ``repin``     ``repin(sid, cpus)``: every thread of a job's session onto fewer CPUs (the runners use it too)
* ``models``    ``Profile`` (pydantic), ``check_profile_name``
* ``store``     ``ProfileStore`` (put/get/require/list/delete) at ``$COSCHED_HOME/profiles.sqlite``
* ``features``  ``FEATURE_NAMES``, ``raw_features``, ``FeaturePipeline`` (fit/transform/save/load as JSON),
                ``job_figures`` (solo time, scale factor, L3 misses for the reward), ``check_feature_set``
* ``errors``    ``ProfilerInputError`` (exit 2), ``ProfilerRunError`` (exit 1) and their kinds
"""
