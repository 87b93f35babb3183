"""The site adapter: installs into an organization's Neo4j(+GDS) and Milvus, builds the knowledge
graph, communities and summaries, publishes signed summaries and answers the gateway's requests.
Raw documents and chunks never leave the site."""
