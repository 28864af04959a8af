"""Shared pytest set-up. Topic fixtures live in tests/fixtures/<topic>.py; register them here."""

pytest_plugins: list[str] = [
    "tests.fixtures.pipeline",
    "tests.fixtures.sandbox",
    "tests.fixtures.runtime",
    "tests.fixtures.evaluation",
    "tests.fixtures.integrations",
    "tests.fixtures.s3",
    "tests.fixtures.slurm",
]
