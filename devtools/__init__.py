"""Process control and loopback fakes shared by the tests, the benchmarks and `make demo` (not part of the app).

- `devtools.processes`: the standard library only, as `make demo` runs on a fresh machine with the runtime
  requirements alone: paths, free ports, waiting for a condition, starting a logged process and stopping one (or a
  process group) with terminate, wait, kill.
- `devtools.runs`: a Redis db of its own for each test or benchmark run.
- `devtools.servers`: the app's own processes on a test or benchmark stack (Celery workers, daphne) and the
  environment they get; Django and Celery are imported only where they are used.
- `devtools.fakes`: loopback servers for everything on the internet (an OpenAI-compatible model server, SearxNG,
  a small web of pages, a canary that counts connections) and the behaviours of a working model
  (`devtools.fakes.behaviours`); the standard library only.
"""
