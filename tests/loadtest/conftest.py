from tests.admin.conftest import tansu  # noqa: F401  (the Tansu broker fixture, for the pipeline mode)
