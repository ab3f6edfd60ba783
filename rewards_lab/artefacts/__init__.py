"""Client artefacts generated from the service's own OpenAPI document: TypeScript types and a Postman collection."""
