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
ENV TRAINBOARD_DATA_DIR=/data
EXPOSE 8000
CMD ["uvicorn", "backend.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000"]
