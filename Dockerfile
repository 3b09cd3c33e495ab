# The image deploy/compose.yaml and the Helm chart (deploy/helm/streamrec) run: every service is
# `streamrec <command>`. CPU build: torch from the PyTorch CPU index, fbgemm-gpu-cpu, and torchrec
# without its unpinned CUDA fbgemm-gpu, at the pins the Makefile installs (a test keeps them equal).
FROM python:3.11-slim

ARG FBGEMM_VERSION=1.9.0
ARG TORCHREC=torchrec==1.9.2

ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 HOME=/tmp
WORKDIR /opt/streamrec
COPY pyproject.toml README.md ./
COPY cli ./cli
COPY schemas ./schemas
COPY streams ./streams
COPY models ./models
COPY online_trainer ./online_trainer
COPY serving ./serving
COPY deploy ./deploy
COPY bench ./bench
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu . \
    && pip install --no-deps "fbgemm-gpu-cpu==${FBGEMM_VERSION}" "${TORCHREC}"

USER 10001
ENTRYPOINT ["streamrec"]
