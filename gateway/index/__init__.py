"""The routing index: what sites published, kept searchable. summaries.py (`SummaryIndex`: each
site's current set of summary embeddings, swapped atomically), ann.py (the in-memory FAISS search),
codes.py (summary vectors held as int8 codes), durable.py (its durable copy: codes in Milvus, a
head file per site) and head_mirror.py (the heads mirrored into Milvus for follower replicas).

Imports no other gateway room: a publication reaches it already verified (trust/), and what is
searched for whom is the query pipeline's business.
"""
