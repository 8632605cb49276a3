# One image for web (daphne), worker, beat and flower.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=researchsite.settings
WORKDIR /app

# A Unicode TrueType font for the PDF export of reports (research/web/exports.py); nothing else is a system package.
RUN apt-get update && apt-get install -y --no-install-recommends fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*

# The runtime only: the test, lint and benchmark tools (requirements/dev.txt) stay out of the image.
COPY requirements/ requirements/
RUN pip install --no-cache-dir -r requirements/base.txt

COPY . .
RUN SECRET_KEY=build-only DEBUG=false python manage.py collectstatic --noinput

RUN useradd --create-home --uid 1000 app
USER app
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "researchsite.asgi:application"]
