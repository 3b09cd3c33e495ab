"""The scorer's four stages, one module each, run in order by serving/pipeline.py."""
