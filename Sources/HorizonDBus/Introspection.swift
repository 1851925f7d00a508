/// The XML that `org.freedesktop.DBus.Introspectable.Introspect` returns, in the format of the
/// D-Bus specification's introspection DTD.
enum Introspection {
    static let doctype = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        """

    /// The standard interfaces the connection implements for every exported object.
    static let standardInterfaces = """
          <interface name="org.freedesktop.DBus.Introspectable">
            <method name="Introspect">
              <arg name="xml_data" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Peer">
            <method name="Ping"/>
            <method name="GetMachineId">
              <arg name="machine_uuid" type="s" direction="out"/>
            </method>
          </interface>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="out"/>
            </method>
            <method name="GetAll">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="props" type="a{sv}" direction="out"/>
            </method>
            <method name="Set">
              <arg name="interface_name" type="s" direction="in"/>
              <arg name="property_name" type="s" direction="in"/>
              <arg name="value" type="v" direction="in"/>
            </method>
            <signal name="PropertiesChanged">
              <arg name="interface_name" type="s"/>
              <arg name="changed_properties" type="a{sv}"/>
              <arg name="invalidated_properties" type="as"/>
            </signal>
          </interface>

        """

    static let objectManagerInterface = """
          <interface name="org.freedesktop.DBus.ObjectManager">
            <method name="GetManagedObjects">
              <arg name="objects" type="a{oa{sa{sv}}}" direction="out"/>
            </method>
            <signal name="InterfacesAdded">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="a{sa{sv}}"/>
            </signal>
            <signal name="InterfacesRemoved">
              <arg name="object" type="o"/>
              <arg name="interfaces" type="as"/>
            </signal>
          </interface>

        """

    /// The document for an exported object (or, with `object` nil, for a node that only has
    /// children). Names and signatures were validated at export, so they hold no XML specials;
    /// they are escaped anyway.
    static func document(object: ExportedObject?, children: [String]) -> String {
        var xml = doctype + "\n<node>\n"
        if let object {
            xml += standardInterfaces
            if object.isObjectManager { xml += objectManagerInterface }
            for interface in object.interfaces {
                xml += "  <interface name=\"\(escape(interface.name))\">\n"
                for method in interface.methods {
                    let inputs = method.inputSignature.flatMap(DBusSyntax.completeTypes(of:)) ?? []
                    let outputs = method.outputSignature.flatMap(DBusSyntax.completeTypes(of:)) ?? []
                    if inputs.isEmpty, outputs.isEmpty {
                        xml += "    <method name=\"\(escape(method.name))\"/>\n"
                        continue
                    }
                    xml += "    <method name=\"\(escape(method.name))\">\n"
                    for type in inputs { xml += "      <arg type=\"\(escape(type))\" direction=\"in\"/>\n" }
                    for type in outputs { xml += "      <arg type=\"\(escape(type))\" direction=\"out\"/>\n" }
                    xml += "    </method>\n"
                }
                for signal in interface.signals {
                    let types = DBusSyntax.completeTypes(of: signal.signature) ?? []
                    if types.isEmpty {
                        xml += "    <signal name=\"\(escape(signal.name))\"/>\n"
                        continue
                    }
                    xml += "    <signal name=\"\(escape(signal.name))\">\n"
                    for type in types { xml += "      <arg type=\"\(escape(type))\"/>\n" }
                    xml += "    </signal>\n"
                }
                for property in interface.properties {
                    let access = property.isWritable ? "readwrite" : "read"
                    xml +=
                        "    <property name=\"\(escape(property.name))\" type=\"\(escape(property.signature))\" "
                        + "access=\"\(access)\""
                    if !property.emitsChangedSignal {
                        xml += ">\n      <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" "
                        xml += "value=\"false\"/>\n    </property>\n"
                    } else {
                        xml += "/>\n"
                    }
                }
                xml += "  </interface>\n"
            }
        }
        for child in children { xml += "  <node name=\"\(escape(child))\"/>\n" }
        return xml + "</node>\n"
    }

    static func escape(_ text: String) -> String {
        var result = ""
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&apos;"
            default: result.append(character)
            }
        }
        return result
    }
}
