package io.platformstreams.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;

import java.util.List;

import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * The bean Apicurio's config-index extension would build at Quarkus build time (the list of
 * properties an admin may change at run time). That extension's build step is not published on
 * Maven Central, so the list is empty here: every property keeps its static value.
 */
public class DynamicPropertiesProducer {

    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
