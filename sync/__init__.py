"""The contract between a site and the gateway: wire types, vector encoding, DSSE envelopes,
Ed25519 identities and publications. `plugin` and `gateway` both import this; never each other."""
