"""The review packet (DESIGN.md section 12): `accsim review STUDY.yaml --out DIR` turns a
study spec into one folder a performance review can sign off on.

study          the study spec (pydantic) and its resolution into loaded inputs
runs           which runs a study needs, simulated once and reused by content hash
sections       the packet's sections, each with a verdict, built from result files only,
               one module per section (sections/), reading the typed result models
providers      one function per section that needs a feature this build may lack
figures        the trend and breakdown figures (SVG)
packet         assembly and writing of index.html, packet.md, packet.json
review_command the `accsim review` verb
"""
