# Quorum bot image. Weaviate runs in its own container (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    QUORUM_DATA_DIR=/data

WORKDIR /app
COPY requirements.lock .
RUN pip install --no-cache-dir --no-deps -r requirements.lock
COPY pyproject.toml README.md manifest.yml ./
COPY bot bot
COPY adapters adapters
COPY retrieval retrieval
COPY examples examples
RUN pip install --no-cache-dir --no-deps .

VOLUME ["/data"]
EXPOSE 3000 8088
ENTRYPOINT ["quorum"]
CMD ["serve"]
