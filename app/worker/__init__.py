"""Workers: the durable queue, the job child process that runs the pipeline,
the embedded thread pool, and the Celery tasks."""
