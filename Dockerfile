# kueri for TIRA: `docker run --rm --network none -v IN:/input:ro -v OUT:/output kueri:latest
#   my-software.sh -i /input -o /output`. Register in TIRA: /usr/local/bin/my-software.sh -i $inputDataset
#   -o $outputDir (absolute: TIRA's client reads the script from the image, a bare name from WORKDIR).
# Build with `make image`: Python packages come from wheels built on the host (build/wheelhouse, build/kueri-wheel),
# so nothing is fetched from the package index inside the build; `BASE` defaults to Debian 12's slim
# image, and `make image` makes an equivalent one with debootstrap where no registry can be reached.
ARG BASE=debian:bookworm-slim

# Python 3.11 and a Java 17 runtime (pyjnius loads its libjvm.so): nothing for building.
FROM ${BASE} AS system
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 openjdk-17-jre-headless \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log

# kueri's dependencies into a venv, from the wheelhouse only (pip runs from its own wheel: the image needs no
# pip), in a layer of their own: a change to kueri alone reuses it where Docker keeps its cache. The wheelhouse
# holds exactly their wheels (`pip wheel` of kueri, then pyserini, which kueri only needs for the Lucene jar it
# carries), so each is installed --no-deps.
FROM system AS install
COPY build/wheelhouse /wheelhouse
RUN set -e; set -- /wheelhouse/pip-*.whl; pip="/opt/kueri/bin/python $1/pip"; \
    python3 -m venv --without-pip /opt/kueri; \
    $pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check \
      $(ls /wheelhouse/*.whl | grep -v '/pip-')
# kueri itself (build/kueri-wheel), on top.
COPY build/kueri-wheel /kueri-wheel
RUN set -e; set -- /wheelhouse/pip-*.whl; \
    /opt/kueri/bin/python "$1/pip" install --no-index --no-deps --no-cache-dir --disable-pip-version-check \
      /kueri-wheel/kueri-*.whl

FROM system
COPY --from=install /opt/kueri /opt/kueri
COPY my-software.sh /usr/local/bin/my-software.sh
RUN useradd --create-home --uid 1000 kueri
USER kueri
WORKDIR /home/kueri
# The work folder (index, embeddings) defaults to ~/.cache/kueri/work inside the container.
ENV PATH=/opt/kueri/bin:$PATH KUERI_PYTHON=/opt/kueri/bin/python
CMD ["my-software.sh", "-h"]
