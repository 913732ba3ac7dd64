# One image for the API and the workers. GPU hosts run it with the NVIDIA runtime.
FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim-bookworm
WORKDIR /app
ARG TORCH_VERSION=2.13.0
RUN pip install --no-cache-dir torch==${TORCH_VERSION}
COPY pyproject.toml README.md alembic.ini ./
COPY backend/ backend/
COPY workers/ workers/
COPY migrations/ migrations/
RUN pip install --no-cache-dir -e .
COPY --from=frontend /src/frontend/dist frontend/dist
# trainboard: the service user the API runs as. trainboard-job: the account whose group a
# root worker starts ranks in (uid TRAINBOARD_JOB_UID_BASE + job id, no new privileges).
# /data is the service's; ranks only traverse it (0711) to reach their own run dir.
RUN useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin trainboard \
    && useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin trainboard-job \
    && mkdir -p /data \
    && chown trainboard:trainboard /data \
    && chmod 0711 /data
ENV TRAINBOARD_DATA_DIR=/data \
    TRAINBOARD_JOB_USER=trainboard-job
USER trainboard
EXPOSE 8000
CMD ["uvicorn", "backend.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000", \
     "--ws", "backend.telemetry.live.direct:DirectWebSocketProtocol", "--no-proxy-headers"]
