# make demo  - set up a virtual environment, compare all policies on the paper scenario and
#              write an HTML report to demo-out/report/report.html
# make test  - set up and run the whole test suite, linters included, on TEST_WORKERS (2) workers
# make test-fast - the linters, then the unit and property tests only (pytest -m "not service")
# make bench - time whole simulations per policy and one service decision; writes
#              bench/results.md and bench/service.md
# make zoo   - the benchmark zoo: every policy on 14 scenario families (generated and real
#              traces; needs ../shared/data); writes bench/zoo.md, bench/zoo.png, bench/zoo.runs.csv
# make zoo-holdout - the hold-out families (bench/zoo/holdout.yaml, never tuned on): bench/zoo-holdout.md
# make zoo-holdout2 - the second hold-out (bench/zoo/holdout2.yaml, written after issue 42's defaults): bench/zoo-holdout2.md
# make zoo-holdout3 - the third hold-out (bench/zoo/holdout3.yaml, written 2026-12-06 before any run): bench/zoo-holdout3.md
# make zoo-holdout4 - the fourth hold-out (bench/zoo/holdout4.yaml, written 2026-12-06 after the gate's default froze): bench/zoo-holdout4.md
# make zoo-holdout5 - the fifth hold-out (bench/zoo/holdout5.yaml, written 2026-12-07 after the restart rollouts' defaults froze): bench/zoo-holdout5.md
# make zoo-gangs - two families with gangs over several nodes (bench/zoo/gangs.yaml, issue 43): bench/zoo-gangs.md
# make lint  - ruff on src, tests, bench and examples, mypy on src (make test runs it first)
# make install-browser - Debian's chromium for the dashboard's browser tests (make test runs it)
# make install-slurm - Debian's Slurm and munge for the slurm executor's tests (make test runs it)
# make install-acl - Debian's acl (setfacl) for the job-isolation tests (make test runs it)
# make screenshots - the dashboard's pages in that browser at 1280x800, into docs/img
# make bench-service - 300 submissions with 50 in flight, 1000 with 100, and 300 with 50 while
#              1000 are queued, to a real andreas serve: latency percentiles, errors, jobs
#              listed; appends to bench/service-load.md
# make chaos - kill -9 the service at 20 random moments of a real workload, on SQLite and on
#              PostgreSQL; then check every job; appends to docs/chaos.md (about 10 minutes)
# make bench-bound - the LP lower bound on two instances of each zoo family, and andreas's gap to it: bench/bound_zoo.md
# make bench-budget - cost against decision budget (andreas); writes bench/budget.md and .png
# make bench-decisions - andreas decision time p50/p99/max at 100 nodes x 450 jobs and
#              252 nodes (2,016 GPUs) x 1,000 jobs; writes bench/decisions.md
# make bench-forecasts - the forward checks' futures played compiled and in the simulator on
#              eight zoo instances: time and cost both ways; writes bench/forecasts.md
# make bench-carbon - emissions, cost and tardiness per policy and carbon price on the paper
#              scenario and real Philly and Alibaba windows under CAISO's and PJM's series, and
#              the carbon-price sweeps with their Pareto figures, and daily caps (needs
#              ../shared/data; about an hour): bench/carbon.md, bench/carbon-pareto-*.md,
#              bench/carbon-cap.md, docs/img/carbon-pareto-*.png
# make bench-scale - the whole Philly and Alibaba 2023 traces, the baselines event by event and
#              the Randomized Greedy in 300 s rounds (needs ../shared/data; about 30
#              minutes); writes bench/scale.md and bench/scale-alibaba.md
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# make test's pytest workers: CI has 2 cores; the suite took 22 minutes on one (2026-12-07)
TEST_WORKERS ?= 2

.PHONY: demo test test-fast lint zoo zoo-holdout zoo-holdout2 zoo-holdout3 zoo-holdout4 zoo-holdout5 zoo-gangs bench bench-bound bench-budget bench-decisions bench-forecasts bench-scale bench-carbon bench-service chaos install install-browser install-slurm install-acl screenshots clean

$(STAMP): pyproject.toml requirements.lock
	@echo "== setting up $(VENV): ANDREAS, its service and test dependencies (a few minutes, once)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c requirements.lock -e '.[test,service,ray]'
	@# The PyTorch example's test: the CPU build, only where the machine carries its wheel
	@# (pip's find-links); elsewhere that one test says it was skipped and why.
	-$(BIN)/pip install -q -c requirements.lock 'torch==2.13.0+cpu' 2>/dev/null || \
		echo "torch CPU wheel not available here: the PyTorch example test will be skipped"
	touch $(STAMP)

install: $(STAMP)

install-browser:
	scripts/install-browser.sh

install-slurm:
	scripts/install-slurm.sh

install-acl:
	scripts/install-acl.sh

demo: $(STAMP)
	@echo "== 1/3 a scenario of the paper's cluster (demo-out/scenario)"
	$(BIN)/andreas generate --nodes 10 --lambda 10000 --seed 1 --out demo-out/scenario
	@echo "== 2/3 andreas on it (demo-out/andreas)"
	$(BIN)/andreas simulate demo-out/scenario --policy andreas --seed 1 --out demo-out/andreas
	@echo "== 3/3 five policies on five instances, five seeds (the longest step)"
	$(BIN)/andreas compare --generate 10 --instances 5 --lambda 10000 --seeds 1-5 \
		--policies fifo,edf,ps,greedy,andreas --out demo-out/compare --report demo-out/report
	@echo "== done: demo-out/report/report.html; the andreas command: source $(VENV)/bin/activate"

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy src/andreas

test: $(STAMP) install-browser install-slurm install-acl lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

test-fast: $(STAMP) lint
	$(BIN)/python -m pytest -m "not service and not slow"

screenshots: $(STAMP) install-browser
	$(BIN)/python scripts/ui_screenshots.py --out docs/img

zoo: $(STAMP)
	$(BIN)/python bench/zoo/run.py --out bench/zoo.md \
		--variant 'andreas-no-search-check=andreas:search_check=false' \
		--variant 'andreas-no-forward-check=andreas:forward_check=false' \
		--variant 'andreas-no-hold=andreas:consolidate.share=off;wait.share=off;company.share=off' \
		--variant 'andreas-hold-when-late=andreas:hold_when_late=true' \
		--variant 'andreas-no-consolidate=andreas:consolidate.margin=off' \
		--variant 'andreas-no-resize=andreas:resize_max_load=0' 

zoo-holdout: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/holdout.yaml --out bench/zoo-holdout.md

zoo-holdout2: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/holdout2.yaml --seeds 1,2,3 \
		--out bench/zoo-holdout2.md

zoo-holdout3: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/holdout3.yaml --seeds 1,2,3 \
		--out bench/zoo-holdout3.md

zoo-holdout4: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/holdout4.yaml --seeds 1,2,3 \
		--out bench/zoo-holdout4.md

zoo-holdout5: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/holdout5.yaml --seeds 1,2,3 \
		--out bench/zoo-holdout5.md

zoo-gangs: $(STAMP)
	$(BIN)/python bench/zoo/run.py --families-file bench/zoo/gangs.yaml --seeds 1,2,3 \
		--out bench/zoo-gangs.md

bench: $(STAMP)
	$(BIN)/python bench/simulate_bench.py --out bench/results.md
	$(BIN)/python bench/service_bench.py --out bench/service.md

bench-service: $(STAMP)
	$(BIN)/python bench/service_load.py --jobs 300 --in-flight 50 --out bench/service-load.md
	$(BIN)/python bench/service_load.py --jobs 1000 --in-flight 100 --out bench/service-load.md
	$(BIN)/python bench/service_load.py --queued 1000 --jobs 300 --in-flight 50 \
		--out bench/service-load.md

chaos: $(STAMP)
	$(BIN)/python bench/chaos.py --kills 20 --database sqlite --out docs/chaos.md
	$(BIN)/python bench/chaos.py --kills 20 --database postgresql --out docs/chaos.md

bench-budget: $(STAMP)
	$(BIN)/python bench/budget_bench.py --out bench/budget.md

bench-bound: $(STAMP)
	$(BIN)/python bench/bound_zoo.py --instances 2 --out bench/bound_zoo.md

bench-decisions: $(STAMP)
	$(BIN)/python bench/decision_bench.py --out bench/decisions.md

bench-forecasts: $(STAMP)
	$(BIN)/python bench/forecast_bench.py --out bench/forecasts.md

bench-carbon: $(STAMP)
	$(BIN)/python bench/carbon_demo.py --carbon-prices 0,100,400
	$(BIN)/python bench/carbon_demo.py --workload philly-windows --carbon-prices 0,100 --append
	$(BIN)/python bench/carbon_demo.py --workload alibaba-windows --carbon-prices 0,100 --append
	$(BIN)/python bench/carbon_pareto.py --workload philly-windows --zone CAISO
	$(BIN)/python bench/carbon_pareto.py --workload alibaba-windows --zone CAISO
	$(BIN)/python bench/carbon_cap_demo.py --workload philly-windows --zone CAISO

bench-scale: $(STAMP)
	$(BIN)/python bench/scale_bench.py --kind philly --out bench/scale.md
	$(BIN)/python bench/scale_bench.py --kind alibaba --out bench/scale-alibaba.md

clean:
	rm -rf $(VENV) demo-out
