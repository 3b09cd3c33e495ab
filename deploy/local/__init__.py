"""Local Kafka and Redis without Docker: started, health-checked and stopped by the project."""
